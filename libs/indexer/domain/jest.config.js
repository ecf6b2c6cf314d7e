module.exports = {
  displayName: 'indexer-domain',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
