module.exports = {
  displayName: 'chain-contracts',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
