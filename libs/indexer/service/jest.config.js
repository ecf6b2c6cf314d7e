module.exports = {
  displayName: 'indexer-service',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
