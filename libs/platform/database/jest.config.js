module.exports = {
  displayName: 'platform-database',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
