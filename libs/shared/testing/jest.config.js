module.exports = {
  displayName: 'shared-testing',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
