module.exports = {
  displayName: 'chain-relayer',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
