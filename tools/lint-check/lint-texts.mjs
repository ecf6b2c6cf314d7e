// Lints source texts under given file paths with the workspace's ESLint config (nothing is written) and prints
// the messages as JSON. Runs as its own process because ESLint loads eslint.config.mjs with a dynamic import,
// which Jest's module system does not allow. Input on stdin: [{ "filePath": "...", "text": "..." }].
import { ESLint } from 'eslint';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..', '..');
let input = '';
for await (const chunk of process.stdin) input += chunk;
const eslint = new ESLint({ cwd: root });
const results = [];
for (const { filePath, text } of JSON.parse(input)) {
  const [result] = await eslint.lintText(text, { filePath: join(root, filePath) });
  results.push((result?.messages ?? []).map((m) => ({ ruleId: m.ruleId, message: m.message })));
}
// Last line: the results (Nx plugins may print warnings to stdout before it).
process.stdout.write(`\n${JSON.stringify(results)}\n`);
