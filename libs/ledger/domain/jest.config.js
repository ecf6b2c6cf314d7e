module.exports = {
  displayName: 'ledger-domain',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
