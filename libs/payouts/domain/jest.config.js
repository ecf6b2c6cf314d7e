module.exports = {
  displayName: 'payouts-domain',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
