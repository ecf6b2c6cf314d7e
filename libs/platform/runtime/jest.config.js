module.exports = {
  displayName: 'platform-runtime',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
