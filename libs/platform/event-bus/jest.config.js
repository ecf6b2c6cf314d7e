module.exports = {
  displayName: 'platform-event-bus',
  preset: '../../../jest.preset.js',
  rootDir: __dirname,
};
