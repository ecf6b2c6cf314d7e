module.exports = {
  displayName: 'merchants-service',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
