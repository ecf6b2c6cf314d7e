module.exports = { displayName: 'embedded', preset: '../../jest.preset.js', rootDir: __dirname };
