module.exports = {
  displayName: 'shared-hosted-ui',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
