module.exports = {
  displayName: 'merchants-api',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
