module.exports = {
  displayName: 'webhooks-domain',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
