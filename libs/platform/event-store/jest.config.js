module.exports = {
  displayName: 'platform-event-store',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
