// A shop's Express server with its schedules in-process (node-cron 4): every replica runs each of them.
const express = require('express');
const cron = require('node-cron');
const { sendWeeklyReport, purgeCarts } = require('./jobs/report');
const { syncStock: syncInventory } = require('./jobs/stock');

const app = express();

cron.schedule('0 17 * * 5', sendWeeklyReport, { timezone: 'Europe/Berlin', name: 'weekly-report' });
cron.schedule('0 30 2 * * *', async () => {
  await purgeCarts();
}, { timezone: 'Europe/Berlin' });
cron.schedule('*/15 9-17 * * 1-5', () => syncInventory(), { timezone: 'America/New_York' });
cron.schedule('0 0 1 * *', function () { return rotateKeys(); });
cron.schedule('*/30 * * * * *', () => {
  console.log('heartbeat');
});
cron.schedule('0 12 1 * 1', sendWeeklyReport);
cron.schedule(process.env.DIGEST_CRON, sendWeeklyReport);

function rotateKeys() {}
module.exports.rotateKeys = rotateKeys;

app.listen(8080);
