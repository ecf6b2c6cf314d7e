module.exports = {
  displayName: 'payments-service',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
