module.exports = {
  displayName: 'chain-evm',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
