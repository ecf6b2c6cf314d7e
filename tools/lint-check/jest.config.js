module.exports = { displayName: 'lint-check', preset: '../../jest.preset.js', rootDir: __dirname };
