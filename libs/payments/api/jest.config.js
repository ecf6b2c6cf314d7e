module.exports = {
  displayName: 'payments-api',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
