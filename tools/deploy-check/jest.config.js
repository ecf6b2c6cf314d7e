module.exports = { displayName: 'deploy-check', preset: '../../jest.preset.js', rootDir: __dirname };
