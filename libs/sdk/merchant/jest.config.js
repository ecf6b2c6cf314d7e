module.exports = {
  displayName: 'sdk-merchant',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
