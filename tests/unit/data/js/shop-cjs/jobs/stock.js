exports.syncStock = async () => {};
