// The same shop as an ES module, node-cron imported by name.
import { schedule } from 'node-cron';
import nightly from './tasks/nightly.mjs';
import { hourly as everyHour } from './tasks/hourly.mjs';

schedule('0 2 * * *', nightly, { timezone: 'America/New_York' });
schedule('0 * * * *', () => everyHour(), { name: 'hourly-sync', timezone: 'Europe/Berlin' });
schedule('5 4 * * SUN', nightly);
