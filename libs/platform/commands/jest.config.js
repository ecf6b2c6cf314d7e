module.exports = {
  displayName: 'platform-commands',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
