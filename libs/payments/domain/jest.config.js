module.exports = {
  displayName: 'payments-domain',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
