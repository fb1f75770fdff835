/**
 * Claim a scheduled run once, in the app's own database (DESIGN "The app's half: the claim"): the Node twin
 * of libs/python/appschedule_claim, passing the same conformance suite (libs/conformance/claim.json).
 *
 *   import { withClaim } from "@appschedule/claim";
 *   await withClaim(pool, async () => sendTheReport());   // runs only when this run won the claim
 *
 * One row per (task, scheduled time) in appschedule_claims: whoever inserts it first wins; the others lose
 * and do nothing. A run that ends well marks the fire done for good; one that throws releases its claim. A
 * row left by a run that died is taken over at once by the same Job's next attempt, and by any other run once
 * older than the task's activeDeadlineSeconds, by exactly one of several racing. Every time is the
 * database's own clock. Databases: pg (Client, Pool), mysql2 (promise connections and pools), sql.js and
 * better-sqlite3 (Database), recognised by their shape.
 */
import * as fs from "fs";

export const TABLE = "appschedule_claims";
export const DEFAULT_DEADLINE = 3600;
const TERMINATION_LOG = "/dev/termination-log";

export class ClaimError extends Error {}

export interface Run {
  task: string;
  scheduledTime: string;
  owner: string;
  deadline: number;
}

export type Outcome = "won" | "taken-over" | "lost";

export interface Claim {
  run: Run;
  outcome: Outcome;
  won: boolean;
}

export function keyOf(run: Run): string {
  return `${run.task}@${run.scheduledTime}`;
}

/** The run of this container, from the variables the operator sets (the Job's name when the key webhook was down). */
export function runFromEnv(env: Record<string, string | undefined> = process.env): Run {
  const task = env.APPSCHEDULE_TASK ?? "";
  if (!task) throw new ClaimError("APPSCHEDULE_TASK is not set: is this a run the operator started?");
  const stated = env.APPSCHEDULE_SCHEDULED_TIME || fromName(env.APPSCHEDULE_JOB_NAME ?? "");
  if (!stated) {
    throw new ClaimError(
      "APPSCHEDULE_SCHEDULED_TIME is not set and the Job's name does not state a fire " +
        "(the key webhook was down for a Job made by hand): nothing to claim",
    );
  }
  const moment = parse(stated);
  const key = env.APPSCHEDULE_IDEMPOTENCY_KEY;
  if (key && key !== `${task}@${moment}`) {
    throw new ClaimError(`APPSCHEDULE_IDEMPOTENCY_KEY ${key} is not ${task}@${moment}: the variables disagree`);
  }
  const owner = (env.APPSCHEDULE_JOB_NAME || env.HOSTNAME || "unknown").slice(0, 253);
  const deadline = /^\d+$/.test(env.APPSCHEDULE_ACTIVE_DEADLINE_SECONDS ?? "")
    ? Number(env.APPSCHEDULE_ACTIVE_DEADLINE_SECONDS)
    : DEFAULT_DEADLINE;
  return { task, scheduledTime: moment, owner, deadline };
}

function fromName(name: string): string {
  const found = /^.+-(\d{8,10})$/.exec(name);
  return found ? iso(new Date(Number(found[1]) * 60_000)) : "";
}

function iso(moment: Date): string {
  return moment.toISOString().replace(/\.\d{3}Z$/, "Z");
}

function parse(text: string): string {
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(text)) {
    throw new ClaimError(`the scheduled time ${JSON.stringify(text)} is not an RFC 3339 time with a zone`);
  }
  return iso(new Date(text));
}

// -- the databases: what differs is the placeholder, "insert unless there", and "now plus N seconds"

interface Dialect {
  name: "postgresql" | "mysql" | "sqlite";
  insert: string;
  suffix: string;
  now: string;
  later: (p: string) => string;
  timestamp: string;
}

const POSTGRES: Dialect = {
  name: "postgresql", insert: "INSERT INTO", suffix: " ON CONFLICT DO NOTHING", now: "CURRENT_TIMESTAMP",
  later: (p) => `CURRENT_TIMESTAMP + ${p} * INTERVAL '1 second'`, timestamp: "TIMESTAMPTZ",
};
const MYSQL: Dialect = {
  name: "mysql", insert: "INSERT IGNORE INTO", suffix: "", now: "CURRENT_TIMESTAMP(6)",
  later: (p) => `TIMESTAMPADD(SECOND, ${p}, CURRENT_TIMESTAMP(6))`, timestamp: "DATETIME(6)",
};
const SQLITE: Dialect = {
  name: "sqlite", insert: "INSERT OR IGNORE INTO", suffix: "", now: "strftime('%Y-%m-%d %H:%M:%f', 'now')",
  later: (p) => `strftime('%Y-%m-%d %H:%M:%f', 'now', ${p} || ' seconds')`, timestamp: "TEXT",
};

/** A database the claim can use: its dialect, and a statement run with ? placeholders giving the rows changed. */
export interface Database {
  dialect: Dialect;
  run(sql: string, params: unknown[]): Promise<number>;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Any = any;

/** The claim's view of a connection or pool of pg, mysql2, sql.js or better-sqlite3. */
export function database(db: Any): Database {
  if (db && typeof db.run === "function" && typeof db.dialect === "object") return db as Database;
  if (db && typeof db.getRowsModified === "function" && typeof db.run === "function") {  // sql.js
    return { dialect: SQLITE, run: async (sql, params) => { db.run(sql, params); return db.getRowsModified(); } };
  }
  if (db && typeof db.prepare === "function" && typeof db.pragma === "function") {  // better-sqlite3
    return { dialect: SQLITE, run: async (sql, params) => db.prepare(sql).run(...params).changes };
  }
  if (db && typeof db.query === "function" && ("connectionParameters" in db || "totalCount" in db || "options" in db) && !("config" in db && "execute" in db)) {  // pg
    return {
      dialect: POSTGRES,
      run: async (sql, params) => {
        let n = 0;
        const text = sql.replace(/\?/g, () => `$${++n}`);
        return (await db.query(text, params)).rowCount ?? 0;
      },
    };
  }
  if (db && typeof db.execute === "function" && typeof db.query === "function") {  // mysql2/promise
    return { dialect: MYSQL, run: async (sql, params) => { const [result] = await db.query(sql, params); return result.affectedRows ?? 0; } };
  }
  throw new ClaimError("a database the claim does not know: pg, mysql2/promise, sql.js or better-sqlite3");
}

async function exec(db: Database, sql: string, params: unknown[]): Promise<number> {
  try {
    return await db.run(sql, params);
  } catch (error) {
    const text = String((error as Error)?.message ?? error).toLowerCase();
    if (["no such table", "does not exist", "doesn't exist", "no such column", "unknown column", "has no column", "undefined"].some((w) => text.includes(w))) {
      throw new ClaimError(`${TABLE} is missing or of another shape (${(error as Error).message}); create it with createTable() or { create: true }`);
    }
    throw new ClaimError(`the claim's statement failed: ${(error as Error)?.message ?? error}`);
  }
}

/**
 * Create appschedule_claims unless it is there; once more when a racing run created it first (PostgreSQL checks
 * "IF NOT EXISTS" before it waits for the other creation, whose commit then fails this one with "already exists"
 * or "duplicate key"; once that run has committed, the table is there).
 */
export async function createTable(conn: Any): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await createTableOnce(conn);
    } catch (error) {
      const text = String((error as Error)?.message ?? error).toLowerCase();
      if (attempt === 2 || !(text.includes("already exists") || text.includes("duplicate key"))) throw error;
    }
  }
}

async function createTableOnce(conn: Any): Promise<void> {
  const db = database(conn);
  const t = db.dialect.timestamp;
  await exec(db, `CREATE TABLE IF NOT EXISTS ${TABLE} (task VARCHAR(63) NOT NULL, scheduled_for VARCHAR(32) NOT NULL, ` +
    `claimed_by VARCHAR(253) NOT NULL, claimed_at ${t} NOT NULL, expires_at ${t} NOT NULL, finished_at ${t} NULL, ` +
    `takeovers INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (task, scheduled_for))`, []);
}

/** Claim the run: insert its row, else take over one its own Job left or one past its deadline, else lose. */
export async function take(conn: Any, run: Run): Promise<Claim> {
  const db = database(conn);
  const d = db.dialect;
  const inserted = await exec(db,
    `${d.insert} ${TABLE} (task, scheduled_for, claimed_by, claimed_at, expires_at, takeovers) ` +
    `VALUES (?, ?, ?, ${d.now}, ${d.later("?")}, 0)${d.suffix}`,
    [run.task, run.scheduledTime, run.owner, run.deadline]);
  if (inserted === 1) return { run, outcome: "won", won: true };
  const taken = await exec(db,
    `UPDATE ${TABLE} SET claimed_by = ?, claimed_at = ${d.now}, expires_at = ${d.later("?")}, takeovers = takeovers + 1 ` +
    `WHERE task = ? AND scheduled_for = ? AND finished_at IS NULL AND (expires_at < ${d.now} OR claimed_by = ?)`,
    [run.owner, run.deadline, run.task, run.scheduledTime, run.owner]);
  return taken === 1 ? { run, outcome: "taken-over", won: true } : { run, outcome: "lost", won: false };
}

/** The run did its work: the fire is done for good. */
export async function finish(conn: Any, run: Run): Promise<void> {
  const db = database(conn);
  await exec(db, `UPDATE ${TABLE} SET finished_at = ${db.dialect.now} WHERE task = ? AND scheduled_for = ? AND claimed_by = ? AND finished_at IS NULL`,
    [run.task, run.scheduledTime, run.owner]);
}

/** The run failed: its row goes, so the Job's next attempt or a re-run claims the fire again. */
export async function release(conn: Any, run: Run): Promise<void> {
  await exec(database(conn), `DELETE FROM ${TABLE} WHERE task = ? AND scheduled_for = ? AND claimed_by = ? AND finished_at IS NULL`,
    [run.task, run.scheduledTime, run.owner]);
}

/** "appschedule.dev/claim: <outcome> <key>" in the termination message Kubernetes mounts (never created here). */
export function reportOutcome(claimed: Claim, path = process.env.APPSCHEDULE_TERMINATION_LOG ?? TERMINATION_LOG): void {
  try {
    if (fs.statSync(path).isFile()) fs.appendFileSync(path, `appschedule.dev/claim: ${claimed.outcome} ${keyOf(claimed.run)}\n`);
  } catch {
    // outside a pod: nothing to tell
  }
}

export interface Options {
  run?: Run;
  create?: boolean;
  report?: boolean;
}

/** Run fn only when this run wins the claim; finish on success, release when fn throws. The claim is returned. */
export async function withClaim<T>(conn: Any, fn: (claimed: Claim) => Promise<T> | T, options: Options = {}): Promise<Claim & { result?: T }> {
  const run = options.run ?? runFromEnv();
  if (options.create) await createTable(conn);
  const claimed = await take(conn, run);
  if (options.report ?? true) reportOutcome(claimed);
  if (!claimed.won) return claimed;
  let result: T;
  try {
    result = await fn(claimed);
  } catch (error) {
    await release(conn, run).catch(() => undefined);
    throw error;
  }
  await finish(conn, run);
  return { ...claimed, result };
}
