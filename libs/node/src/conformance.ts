/**
 * The claim's conformance suite (libs/conformance/claim.json) run by the Node library:
 *   node dist/conformance.js sqlite: | better-sqlite3:DIR | postgresql://user@host:port/db | mysql://user@host:port/db
 * (sqlite: is sql.js, SQLite compiled to WebAssembly, one database in memory; better-sqlite3:DIR a file in DIR per
 * scenario, every "connection" a connection of its own to it, as an app's processes have.)
 * Every scenario on a database of its own; prints one line a scenario and exits 1 when any failed.
 */
import * as fs from "fs";
import * as path from "path";
import { ClaimError, Run, TABLE, createTable, database, finish, keyOf, release, runFromEnv, take, withClaim } from "./index";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Any = any;

const SUITE = JSON.parse(fs.readFileSync(path.join(__dirname, "..", "..", "conformance", "claim.json"), "utf8"));

interface Target {
  connect(): Promise<Any>;
  close(conn: Any): Promise<void>;
}

let databases = 0;

async function target(url: string): Promise<Target> {
  const name = `claims_node_${process.pid}_${databases++}`;
  if (url.startsWith("sqlite:")) {
    const initSqlJs = require("sql.js");
    const SQL = await initSqlJs();
    const shared = new SQL.Database();  // one database in memory, every "connection" on it
    return { connect: async () => shared, close: async () => undefined };
  }
  if (url.startsWith("better-sqlite3:")) {
    const Database = require("better-sqlite3");
    const file = path.join(url.slice("better-sqlite3:".length), `${name}.db`);
    return { connect: async () => new Database(file, { timeout: 30000 }), close: async (c) => c.close() };
  }
  if (url.startsWith("postgresql:")) {
    const { Client } = require("pg");
    const admin = new Client({ connectionString: url });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${name}`);
    await admin.end();
    const at = new URL(url);
    at.pathname = `/${name}`;
    return {
      connect: async () => { const c = new Client({ connectionString: at.toString() }); await c.connect(); return c; },
      close: async (c) => c.end(),
    };
  }
  if (url.startsWith("mysql:")) {
    const mysql = require("mysql2/promise");
    const admin = await mysql.createConnection(url);
    await admin.query(`CREATE DATABASE ${name}`);
    await admin.end();
    const at = new URL(url);
    at.pathname = `/${name}`;
    return { connect: async () => mysql.createConnection(at.toString()), close: async (c) => c.end() };
  }
  throw new Error(`a database URL of sqlite:, better-sqlite3:, postgresql: or mysql:, not ${url}`);
}

function runOf(owner: string, deadline: number): Run {
  return { task: SUITE.task, scheduledTime: SUITE.scheduled_time, owner, deadline };
}

async function expired(t: Target): Promise<boolean> {
  const conn = await t.connect();
  try {
    const db = database(conn);
    const changed = await db.run(`UPDATE ${TABLE} SET takeovers = takeovers WHERE expires_at < ${db.dialect.now}`, []);
    return changed > 0 || (db.dialect.name === "mysql" && (await mysqlExpired(conn)));
  } finally {
    await t.close(conn);
  }
}

async function mysqlExpired(conn: Any): Promise<boolean> {  // MySQL counts only rows an UPDATE changed
  const [rows] = await conn.query(`SELECT COUNT(*) AS n FROM ${TABLE} WHERE expires_at < CURRENT_TIMESTAMP(6)`);
  return Number(rows[0].n) > 0;
}

async function waitFor(check: () => Promise<boolean>, seconds: number, what: string): Promise<void> {
  const deadline = Date.now() + seconds * 1000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${seconds}s waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function race(t: Target, count: number, deadline: number, create = false): Promise<Record<string, number>> {
  const conns = await Promise.all(Array.from({ length: count }, () => t.connect()));
  try {
    const claim = async (c: Any, i: number) => {
      if (create) await createTable(c);  // as withClaim(..., { create: true }) does
      return take(c, runOf(`racer-${i}`, deadline));
    };
    const outcomes = await Promise.all(conns.map(claim));
    const counts: Record<string, number> = {};
    for (const o of outcomes) counts[o.outcome] = (counts[o.outcome] ?? 0) + 1;
    return counts;
  } finally {
    await Promise.all(conns.map((c) => t.close(c)));
  }
}

function same(a: Record<string, number>, b: Record<string, number>): boolean {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  return [...keys].every((k) => (a[k] ?? 0) === (b[k] ?? 0));
}

async function play(scenario: Any, url: string): Promise<void> {
  const t = await target(url);
  const deadline = Number(scenario.deadline);
  const conn = await t.connect();
  const realNow = Date.now;
  let shift = 0;
  try {
    if (!scenario.fresh) await createTable(conn);
    for (const step of scenario.steps) {
      Date.now = () => realNow() + shift * 1000;  // the app host's clock, moved by "skew"
      if ("claim" in step) {
        const got = (await take(conn, runOf(step.claim, deadline))).outcome;
        if (got !== step.expect) throw new Error(`${JSON.stringify(step)} gave ${got}`);
      } else if ("finish" in step) {
        await finish(conn, runOf(step.finish, deadline));
      } else if ("fail" in step) {
        await release(conn, runOf(step.fail, deadline));
      } else if ("expire" in step) {
        Date.now = realNow;
        await waitFor(() => expired(t), deadline + 30, "the database's clock past the deadline");
      } else if ("skew" in step) {
        shift += Number(step.skew);
      } else if ("race" in step) {
        const got = await race(t, Number(step.race), deadline, Boolean(step.create));
        if (!same(got, step.expect)) throw new Error(`race gave ${JSON.stringify(got)}`);
      } else {
        throw new Error(`a step of no known kind: ${JSON.stringify(step)}`);
      }
    }
  } finally {
    Date.now = realNow;
    await t.close(conn);
  }
}

async function errors(url: string): Promise<void> {
  for (const c of SUITE.errors) {
    if ("env" in c) {
      if ("key" in c) {
        const key = keyOf(runFromEnv(c.env));
        if (key !== c.key) throw new Error(`${c.name}: ${key}`);
        continue;
      }
      let said = "";
      try { runFromEnv(c.env); } catch (error) { said = error instanceof ClaimError ? error.message : `not a ClaimError: ${error}`; }
      if (!said.includes(c.says)) throw new Error(`${c.name}: said ${JSON.stringify(said)}`);
      continue;
    }
    const t = await target(url);
    const conn = await t.connect();
    try {
      await database(conn).run(c.table, []);
      let said = "";
      try { await take(conn, runOf("job-a", 60)); } catch (error) { said = error instanceof ClaimError ? error.message : `not a ClaimError: ${error}`; }
      if (!said.includes(c.says)) throw new Error(`${c.name}: said ${JSON.stringify(said)}`);
    } finally {
      await t.close(conn);
    }
  }
}

/** withClaim: the work runs only for the winner; a throw releases the claim (a re-run wins), a success finishes it. */
async function wrapper(url: string): Promise<void> {
  const t = await target(url);
  const conn = await t.connect();
  try {
    let ran = 0;
    const failing = withClaim(conn, () => { ran += 1; throw new Error("the report failed"); }, { run: runOf("job-a", 3600), create: true, report: false });
    if (!(await failing.then(() => false, (e: Error) => e.message === "the report failed"))) throw new Error("the throw did not come through");
    const again = await withClaim(conn, () => { ran += 1; return "sent"; }, { run: runOf("job-b", 3600), report: false });
    if (again.outcome !== "won" || again.result !== "sent") throw new Error(`after a release: ${JSON.stringify(again)}`);
    const late = await withClaim(conn, () => { ran += 1; }, { run: runOf("job-c", 3600), report: false });
    if (late.won || ran !== 2) throw new Error(`after a finish: ${late.outcome}, ran ${ran} times`);
  } finally {
    await t.close(conn);
  }
}

async function main(): Promise<number> {
  const url = process.argv[2] ?? "sqlite:";
  let failed = 0;
  for (const scenario of SUITE.scenarios) {
    if (/^(better-)?sqlite3?:/.test(url) && scenario.server_only) {
      console.log(`skip ${scenario.name}: ${scenario.server_only}`);
      continue;
    }
    try {
      await play(scenario, url);
      console.log(`ok   ${scenario.name}`);
    } catch (error) {
      failed += 1;
      console.log(`FAIL ${scenario.name}: ${(error as Error).message}`);
    }
  }
  try {
    await wrapper(url);
    console.log("ok   withClaim");
  } catch (error) {
    failed += 1;
    console.log(`FAIL withClaim: ${(error as Error).message}`);
  }
  try {
    await errors(url);
    console.log(`ok   ${SUITE.errors.length} errors`);
  } catch (error) {
    failed += 1;
    console.log(`FAIL errors: ${(error as Error).message}`);
  }
  return failed ? 1 : 0;
}

main().then((code) => process.exit(code), (error) => { console.error(error); process.exit(2); });
