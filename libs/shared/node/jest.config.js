module.exports = {
  displayName: 'shared-node',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
