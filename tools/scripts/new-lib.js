#!/usr/bin/env node
// Scaffolds a library the way every lib here is laid out:
//   node tools/scripts/new-lib.js <dir under libs/> <import name> <tags comma-separated>
// e.g. node tools/scripts/new-lib.js shared/util @stablepay/util scope:shared,type:util
const fs = require('node:fs');
const path = require('node:path');

const [dir, importName, tags] = process.argv.slice(2);
if (!dir || !importName || !tags) {
  console.error('usage: new-lib.js <dir under libs/> <import name> <tags>');
  process.exit(2);
}
const root = path.join(__dirname, '..', '..');
const libRoot = path.join(root, 'libs', dir);
const name = dir.replace(/\//g, '-');
fs.mkdirSync(path.join(libRoot, 'src'), { recursive: true });
const write = (file, text) => {
  const p = path.join(libRoot, file);
  if (!fs.existsSync(p)) fs.writeFileSync(p, text);
};
write(
  'project.json',
  JSON.stringify(
    {
      name,
      $schema: path.relative(libRoot, path.join(root, 'node_modules/nx/schemas/project-schema.json')),
      sourceRoot: `libs/${dir}/src`,
      projectType: 'library',
      tags: tags.split(','),
      targets: { test: {}, lint: {} },
    },
    null,
    2,
  ) + '\n',
);
write(
  'jest.config.js',
  `module.exports = {\n  displayName: '${name}',\n  preset: '${path.relative(libRoot, path.join(root, 'jest.preset.js'))}',\n  rootDir: __dirname,\n};\n`,
);
write('src/index.ts', 'export {};\n');
const tsconfigPath = path.join(root, 'tsconfig.base.json');
const tsconfig = JSON.parse(fs.readFileSync(tsconfigPath, 'utf8'));
tsconfig.compilerOptions.paths[importName] = [`libs/${dir}/src/index.ts`];
tsconfig.compilerOptions.paths = Object.fromEntries(
  Object.entries(tsconfig.compilerOptions.paths).sort(([a], [b]) => a.localeCompare(b)),
);
fs.writeFileSync(tsconfigPath, JSON.stringify(tsconfig, null, 2) + '\n');
console.log(`created libs/${dir} as ${importName} (${name})`);
