module.exports = {
  displayName: 'ledger-service',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
