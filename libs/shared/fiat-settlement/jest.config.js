module.exports = {
  displayName: 'shared-fiat-settlement',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
