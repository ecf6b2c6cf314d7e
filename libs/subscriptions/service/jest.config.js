module.exports = {
  displayName: 'subscriptions-service',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
