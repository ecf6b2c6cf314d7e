#!/usr/bin/env node
// `npm start`: compiles TypeScript on load with swc (decorator metadata, path aliases) and runs the embedded stack.
require('@swc-node/register');
require('./main.ts');
