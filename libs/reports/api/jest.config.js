module.exports = {
  displayName: 'reports-api',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
