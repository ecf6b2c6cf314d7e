module.exports = {
  displayName: 'subscriptions-api',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
