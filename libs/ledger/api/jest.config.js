module.exports = {
  displayName: 'ledger-api',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
