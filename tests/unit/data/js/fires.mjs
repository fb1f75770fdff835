// The fires the frameworks themselves compute, for tests/unit/test_jssource.py: reads [{framework, expression,
// zone, start, end}] (times in epoch seconds) as JSON on stdin, prints one list of fire times (epoch seconds) each.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { T as TimeMatcher } from './node_modules/node-cron/dist/_shared.js';

const require = createRequire(import.meta.url);
const { CronTime } = require('cron');

const asks = JSON.parse(readFileSync(0, 'utf8'));
const LIMIT = 200000;
const answers = asks.map(({ framework, expression, zone, start, end }) => {
  const fires = [];
  if (framework === 'node-cron') {
    const matcher = new TimeMatcher(expression, zone);
    let at = new Date(start * 1000);
    while (fires.length < LIMIT) {
      at = matcher.getNextMatch(at);
      if (at.getTime() > end * 1000) break;
      fires.push(at.getTime() / 1000);
    }
  } else {
    const time = new CronTime(expression, zone);
    let at = new Date(start * 1000);
    while (fires.length < LIMIT) {
      const next = time.getNextDateFrom(at, zone);
      if (next.toMillis() > end * 1000) break;
      fires.push(next.toMillis() / 1000);
      at = next.toJSDate();
    }
  }
  return fires;
});
process.stdout.write(JSON.stringify(answers));
