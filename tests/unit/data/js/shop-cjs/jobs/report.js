exports.sendWeeklyReport = async () => {};
exports.purgeCarts = async () => {};
