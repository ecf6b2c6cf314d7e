module.exports = {
  displayName: 'subscriptions-domain',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
