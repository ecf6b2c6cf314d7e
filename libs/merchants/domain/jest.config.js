module.exports = {
  displayName: 'merchants-domain',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
