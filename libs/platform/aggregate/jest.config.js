module.exports = {
  displayName: 'platform-aggregate',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
