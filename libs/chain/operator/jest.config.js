module.exports = {
  displayName: 'chain-operator',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
