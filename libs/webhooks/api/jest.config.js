module.exports = {
  displayName: 'webhooks-api',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
