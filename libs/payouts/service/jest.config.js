module.exports = {
  displayName: 'payouts-service',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
