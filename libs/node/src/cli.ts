#!/usr/bin/env node
/**
 * appschedule-claim [--database URL] -- CMD ARGS...: claim this container's run, run CMD only when the claim is
 * won, mark the fire done when CMD succeeds and release the claim when it fails. A lost claim exits 0 without
 * running CMD. URL (or APPSCHEDULE_CLAIM_DATABASE): postgresql://... (pg), mysql://... (mysql2) or
 * sqlite:///path/to.db (better-sqlite3; sqlite:////abs/path.db): the driver the image already has.
 */
import { spawnSync } from "child_process";
import { ClaimError, finish, release, reportOutcome, runFromEnv, take, createTable, keyOf } from "./index";

async function connect(url: string): Promise<{ conn: unknown; close: () => Promise<void> }> {
  if (/^postgres(ql)?:/.test(url)) {
    const { Client } = require("pg");
    const conn = new Client({ connectionString: url });
    await conn.connect();
    return { conn, close: () => conn.end() };
  }
  if (/^(mysql|mariadb):/.test(url)) {
    const conn = await require("mysql2/promise").createConnection(url.replace(/^mariadb:/, "mysql:"));
    return { conn, close: () => conn.end() };
  }
  if (/^sqlite:/.test(url)) {
    const file = url.includes(":///") ? url.split(":///", 2)[1] : "";
    if (!file) throw new ClaimError(`${url}: a SQLite URL is sqlite:///path/to.db`);
    let Database;
    try { Database = require("better-sqlite3"); } catch { throw new ClaimError("a SQLite URL needs better-sqlite3 installed"); }
    const conn = new Database(file, { timeout: 30000 })  // sqlite:///relative, sqlite:////absolute, as Python's;
    return { conn, close: async () => conn.close() };
  }
  throw new ClaimError(`${url}: the database URL's scheme is postgresql, mysql or sqlite`);
}

export async function main(argv: string[]): Promise<number> {
  let database = process.env.APPSCHEDULE_CLAIM_DATABASE ?? "";
  let create = false;
  const at = argv.indexOf("--");
  const options = at >= 0 ? argv.slice(0, at) : argv;
  const command = at >= 0 ? argv.slice(at + 1) : [];
  for (let i = 0; i < options.length; i++) {
    if (options[i] === "--database") database = options[++i] ?? "";
    else if (options[i] === "--create") create = true;
  }
  if (!command.length) {
    console.error("usage: appschedule-claim [--database URL] [--create] -- CMD ARGS...");
    return 2;
  }
  let connection: { conn: unknown; close: () => Promise<void> } | undefined;
  try {
    if (!database) throw new ClaimError("no database: --database URL or APPSCHEDULE_CLAIM_DATABASE");
    const run = runFromEnv();
    connection = await connect(database);
    if (create) await createTable(connection.conn);
    const claimed = await take(connection.conn, run);
    reportOutcome(claimed);
    if (!claimed.won) {
      console.error(`appschedule-claim: ${keyOf(run)} is claimed by another run: nothing to do`);
      return 0;
    }
    const done = spawnSync(command[0], command.slice(1), { stdio: "inherit" });
    const code = done.error ? 127 : done.status ?? 1;
    await (code === 0 ? finish : release)(connection.conn, run);
    return code;
  } catch (error) {
    console.error(`appschedule-claim: ${(error as Error).message ?? error}`);
    return 2;
  } finally {
    await connection?.close().catch(() => undefined);
  }
}

if (require.main === module) main(process.argv.slice(2)).then((code) => process.exit(code));
