module.exports = {
  displayName: 'payouts-api',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
