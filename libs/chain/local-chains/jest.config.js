module.exports = {
  displayName: 'chain-local-chains',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
