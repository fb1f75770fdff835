// The digest task, in Node: once per fire, however many Jobs the fire gets (as digest.py, with the Node
// library). `node /app/digest.js`; a run whose claim lost exits 0 without writing.
const os = require("os");
const { Pool } = require("pg");
const { withClaim } = require("@appschedule/claim");

async function main() {
  const pool = new Pool({ connectionString: process.env.DATABASE_URL, max: 1 });
  try {
    const claimed = await withClaim(pool, async ({ run }) => {
      await pool.query("INSERT INTO digests (task, key, host) VALUES ($1, $2, $3)",
        [run.task, process.env.APPSCHEDULE_IDEMPOTENCY_KEY, os.hostname()]);
    }, { create: true });
    console.log(`${process.env.APPSCHEDULE_IDEMPOTENCY_KEY}: ${claimed.outcome}`);
  } finally {
    await pool.end();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
