#!/usr/bin/env node
// Compiles libs/chain/contracts/solidity/**/*.sol with the npm `solc` package (no download: the compiler ships in
// the package) and writes libs/chain/contracts/src/generated/*.ts: the ABI `as const`, creation and runtime
// bytecode, and typed ethers v6 interfaces for every contract.
//
//   node libs/chain/contracts/scripts/compile.js          write the generated files
//   node libs/chain/contracts/scripts/compile.js --check  exit 1 if the committed files are stale
//
// The generated files are committed; artifacts.spec.ts recompiles in memory and compares, so they cannot drift.
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const SOLC_VERSION = '0.8.37';
const ROOT = path.join(__dirname, '..');
const SOURCE_DIR = path.join(ROOT, 'solidity');
const GENERATED_DIR = path.join(ROOT, 'src', 'generated');

/** Contracts exported by the library (src/generated/index.ts); the others are test doubles. */
const PUBLIC_CONTRACTS = [
  'StablepayRegistry',
  'PaymentFactory',
  'PaymentDeposit',
  'PayoutDepositFactory',
  'PayoutDeposit',
  'SubscriptionManagerFactory',
  'SubscriptionManager',
  'TestStablecoin',
];
const TEST_CONTRACTS = ['FeeOnTransferToken', 'HookToken', 'NoReturnToken'];

/**
 * Compiler settings. The CBOR metadata (which hashes the sources, comments included) is left out of the bytecode,
 * so a comment or whitespace edit does not move the deterministic addresses; only a code change does.
 */
const SETTINGS = {
  optimizer: { enabled: true, runs: 10_000 },
  viaIR: true,
  evmVersion: 'cancun',
  metadata: { bytecodeHash: 'none', appendCBOR: false },
  outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object', 'evm.deployedBytecode.object'] } },
};

function readSources(dir = SOURCE_DIR, prefix = '') {
  const sources = {};
  for (const entry of fs
    .readdirSync(dir, { withFileTypes: true })
    .sort((a, b) => a.name.localeCompare(b.name))) {
    const rel = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (entry.isDirectory()) Object.assign(sources, readSources(path.join(dir, entry.name), rel));
    else if (entry.name.endsWith('.sol'))
      sources[rel] = { content: fs.readFileSync(path.join(dir, entry.name), 'utf8') };
  }
  return sources;
}

/** Compiles every source; returns { [contractName]: { name, sourceName, abi, bytecode, deployedBytecode } }. */
function compileContracts() {
  const solc = require('solc');
  if (!solc.version().startsWith(`${SOLC_VERSION}+`)) {
    throw new Error(`solc ${SOLC_VERSION} expected, the installed package is ${solc.version()}`);
  }
  const input = { language: 'Solidity', sources: readSources(), settings: SETTINGS };
  const findImports = (p) => ({
    error: `import not found: ${p} (only sources under solidity/ are compiled)`,
  });
  const output = JSON.parse(solc.compile(JSON.stringify(input), { import: findImports }));
  const errors = (output.errors ?? []).filter((e) => e.severity === 'error');
  if (errors.length > 0) throw new Error(errors.map((e) => e.formattedMessage).join('\n'));
  const warnings = (output.errors ?? []).filter((e) => e.severity !== 'error');
  const contracts = {};
  for (const [sourceName, byName] of Object.entries(output.contracts ?? {})) {
    for (const [name, c] of Object.entries(byName)) {
      if (![...PUBLIC_CONTRACTS, ...TEST_CONTRACTS].includes(name)) continue;
      if (contracts[name]) throw new Error(`duplicate contract name ${name}`);
      contracts[name] = {
        name,
        sourceName: `solidity/${sourceName}`,
        abi: c.abi,
        bytecode: `0x${c.evm.bytecode.object}`,
        deployedBytecode: `0x${c.evm.deployedBytecode.object}`,
      };
    }
  }
  for (const name of [...PUBLIC_CONTRACTS, ...TEST_CONTRACTS]) {
    if (!contracts[name]) throw new Error(`contract ${name} not found in the compiler output`);
  }
  return { contracts, warnings: warnings.map((w) => w.formattedMessage) };
}

// ------------------------------------------------------------------------------------------------ TS rendering

const BASE_CONTRACT_MEMBERS = new Set([
  'target',
  'interface',
  'runner',
  'filters',
  'fallback',
  'connect',
  'attach',
  'getAddress',
  'getDeployedCode',
  'waitForDeployment',
  'deploymentTransaction',
  'getFunction',
  'getEvent',
  'queryTransaction',
  'queryFilter',
  'on',
  'once',
  'emit',
  'listenerCount',
  'listeners',
  'off',
  'removeAllListeners',
  'addListener',
  'removeListener',
]);

function baseType(type) {
  const m = /^(.*)\[(\d*)\]$/.exec(type);
  return m ? { array: true, inner: m[1] } : { array: false, inner: type };
}

function tsType(param, direction) {
  const { array, inner } = baseType(param.type);
  if (array) {
    const innerType = tsType({ ...param, type: inner }, direction);
    return direction === 'in' ? `Array<${innerType}>` : `ReadonlyArray<${innerType}>`;
  }
  if (inner === 'tuple') {
    const fields = param.components.map(
      (c) => `${direction === 'out' ? 'readonly ' : ''}${c.name}: ${tsType(c, direction)}`,
    );
    return `{ ${fields.join('; ')} }`;
  }
  if (/^u?int\d*$/.test(inner)) return direction === 'in' ? 'BigNumberish' : 'bigint';
  if (inner === 'address') return direction === 'in' ? 'AddressLike' : 'string';
  if (inner === 'bool') return 'boolean';
  if (inner === 'string') return 'string';
  if (/^bytes\d*$/.test(inner)) return direction === 'in' ? 'BytesLike' : 'string';
  throw new Error(`unsupported ABI type ${param.type}`);
}

function argList(inputs) {
  return inputs.map((p, i) => `${p.name || `arg${i}`}: ${tsType(p, 'in')}`).join(', ');
}

function outputType(outputs) {
  if (outputs.length === 0) return 'void';
  if (outputs.length === 1) return tsType(outputs[0], 'out');
  if (outputs.every((o) => o.name)) {
    return `{ ${outputs.map((o) => `readonly ${o.name}: ${tsType(o, 'out')}`).join('; ')} }`;
  }
  return `readonly [${outputs.map((o) => tsType(o, 'out')).join(', ')}]`;
}

/**
 * An interface of each entry's decoded arguments by name; a contract with none (a test token without events or custom
 * errors) gets an empty record type, since an empty interface is `{}`, which the lint rules refuse.
 */
function argsByName(lines, name, summary, entries) {
  lines.push(`/** ${summary} */`);
  if (entries.length === 0) {
    lines.push(`export type ${name} = Record<never, never>;`);
  } else {
    lines.push(`export interface ${name} {`);
    for (const e of entries) lines.push(`  readonly ${e.name}: ${namedFields(e.inputs)};`);
    lines.push('}');
  }
  lines.push('');
}

function namedFields(inputs) {
  if (inputs.length === 0) return 'Record<string, never>';
  return `{ ${inputs.map((p, i) => `readonly ${p.name || `arg${i}`}: ${tsType(p, 'out')}`).join('; ')} }`;
}

function doc(item) {
  return `${item.name}(${(item.inputs ?? []).map((p) => p.type).join(',')})`;
}

function renderContract(c) {
  const N = c.name;
  const fns = c.abi.filter((x) => x.type === 'function');
  const events = c.abi.filter((x) => x.type === 'event');
  const errors = c.abi.filter((x) => x.type === 'error');
  const names = fns.map((f) => f.name);
  for (const n of names) {
    if (names.indexOf(n) !== names.lastIndexOf(n)) throw new Error(`${N}.${n} is overloaded: not supported`);
    if (BASE_CONTRACT_MEMBERS.has(n)) throw new Error(`${N}.${n} clashes with an ethers BaseContract member`);
  }
  const ctor = c.abi.find((x) => x.type === 'constructor');
  const lines = [];
  lines.push(
    `// Generated by libs/chain/contracts/scripts/compile.js from ${c.sourceName} (solc ${SOLC_VERSION}). Do not edit.`,
  );
  const importAt = lines.length;
  lines.push('');
  lines.push(`export const ${N}Abi = ${JSON.stringify(c.abi, null, 2)} as const;`);
  lines.push('');
  lines.push(`/** Creation code (constructor arguments are appended ABI-encoded). */`);
  lines.push(`export const ${N}Bytecode = '${c.bytecode}' as const;`);
  lines.push('');
  lines.push(`/** Runtime code as deployed (immutables zero-filled). */`);
  lines.push(`export const ${N}DeployedBytecode = '${c.deployedBytecode}' as const;`);
  lines.push('');
  lines.push(`/** Typed ethers v6 view of a deployed ${N}. */`);
  lines.push(`export interface ${N}Contract extends BaseContract {`);
  for (const f of fns) {
    const args = `[${argList(f.inputs)}]`;
    const ret = outputType(f.outputs);
    lines.push(`  /** ${doc(f)} ${f.stateMutability} */`);
    if (f.stateMutability === 'view' || f.stateMutability === 'pure') {
      lines.push(`  readonly ${f.name}: ConstantContractMethod<${args}, ${ret}>;`);
    } else {
      lines.push(`  readonly ${f.name}: ContractMethod<${args}, ${ret}, ContractTransactionResponse>;`);
    }
  }
  lines.push(`  connect(runner: ContractRunner | null): ${N}Contract;`);
  lines.push('}');
  lines.push('');
  argsByName(lines, `${N}EventArgs`, `Decoded arguments of each ${N} event, by event name.`, events);
  argsByName(lines, `${N}ErrorArgs`, `Decoded arguments of each ${N} custom error, by error name.`, errors);
  lines.push(`export type ${N}ErrorName = keyof ${N}ErrorArgs;`);
  lines.push(`export type ${N}EventName = keyof ${N}EventArgs;`);
  lines.push('');
  lines.push(`let ${lowerFirst(N)}Parsed: Interface | undefined;`);
  lines.push('');
  lines.push(
    `/** ${N}'s ABI parsed once: ethers parses a plain ABI again for every contract object (a fraction of a millisecond of CPU per connect). */`,
  );
  lines.push(`export function ${lowerFirst(N)}Interface(): Interface {`);
  lines.push(`  return (${lowerFirst(N)}Parsed ??= new Interface(${N}Abi));`);
  lines.push('}');
  lines.push('');
  lines.push(`/** A typed ${N} at \`address\`. */`);
  lines.push(`export function connect${N}(address: string, runner?: ContractRunner | null): ${N}Contract {`);
  lines.push(
    `  return new Contract(address, ${lowerFirst(N)}Interface(), runner ?? null) as unknown as ${N}Contract;`,
  );
  lines.push('}');
  lines.push('');
  const ctorArgs = ctor ? argList(ctor.inputs) : '';
  const ctorNames = ctor ? ctor.inputs.map((p, i) => p.name || `arg${i}`) : [];
  lines.push(
    `/** Deploys a new ${N} with a plain CREATE from \`signer\` (tests; production uses deterministic deployment). */`,
  );
  lines.push(
    `export async function deploy${N}(signer: Signer${ctorArgs ? `, ${ctorArgs}` : ''}): Promise<${N}Contract> {`,
  );
  lines.push(`  const factory = new ContractFactory(${N}Abi, ${N}Bytecode, signer);`);
  lines.push(`  const contract = await factory.deploy(${ctorNames.join(', ')});`);
  lines.push('  await contract.waitForDeployment();');
  lines.push(`  return contract as unknown as ${N}Contract;`);
  lines.push('}');
  lines.push('');
  lines.push(`/** ABI-encoded creation code with constructor arguments: the init code for CREATE2. */`);
  lines.push(`export function ${lowerFirst(N)}InitCode(${ctorArgs}): string {`);
  lines.push(
    `  return new ContractFactory(${N}Abi, ${N}Bytecode).interface.encodeDeploy([${ctorNames.join(', ')}]).replace(/^0x/, ${N}Bytecode);`,
  );
  lines.push('}');
  lines.push('');
  // Import exactly the ethers names the body uses (lint: no unused imports).
  const body = lines.join('\n');
  const typeNames = [
    'AddressLike',
    'BaseContract',
    'BigNumberish',
    'BytesLike',
    'ConstantContractMethod',
    'ContractMethod',
    'ContractRunner',
    'ContractTransactionResponse',
    'Signer',
  ];
  const used = typeNames.filter((t) => new RegExp(`\\b${t}\\b`).test(body));
  lines.splice(
    importAt,
    0,
    `import { Contract, ContractFactory, Interface, ${used.map((t) => `type ${t}`).join(', ')} } from 'ethers';`,
  );
  return lines.join('\n');
}

function lowerFirst(s) {
  return s.charAt(0).toLowerCase() + s.slice(1);
}

/** Renders { [file name under src/generated]: content }. */
function renderGenerated(contracts) {
  const files = {};
  const names = [...PUBLIC_CONTRACTS, ...TEST_CONTRACTS];
  for (const name of names) files[`${name}.ts`] = renderContract(contracts[name]);
  const index = [
    `// Generated by libs/chain/contracts/scripts/compile.js (solc ${SOLC_VERSION}). Do not edit.`,
    ...PUBLIC_CONTRACTS.map((n) => `export * from './${n}';`),
    '',
    `export const SOLC_VERSION = '${SOLC_VERSION}' as const;`,
    `export const SOLC_SETTINGS = ${JSON.stringify({ optimizer: SETTINGS.optimizer, viaIR: SETTINGS.viaIR, evmVersion: SETTINGS.evmVersion, metadata: SETTINGS.metadata })} as const;`,
    '',
  ].join('\n');
  files['index.ts'] = index;
  const testIndex = [
    `// Generated by libs/chain/contracts/scripts/compile.js (solc ${SOLC_VERSION}). Do not edit.`,
    '// Test doubles: never deployed outside tests.',
    ...TEST_CONTRACTS.map((n) => `export * from './${n}';`),
    '',
  ].join('\n');
  files['test-doubles.ts'] = testIndex;
  return files;
}

function writeGenerated() {
  const { contracts, warnings } = compileContracts();
  const files = renderGenerated(contracts);
  fs.mkdirSync(GENERATED_DIR, { recursive: true });
  for (const existing of fs.readdirSync(GENERATED_DIR)) {
    if (!(existing in files)) fs.rmSync(path.join(GENERATED_DIR, existing));
  }
  for (const [file, content] of Object.entries(files))
    fs.writeFileSync(path.join(GENERATED_DIR, file), content);
  return { files: Object.keys(files), warnings, contracts };
}

/** Files under src/generated whose committed content differs from a fresh compile (empty when up to date). */
function staleGenerated() {
  const { contracts } = compileContracts();
  const files = renderGenerated(contracts);
  const stale = [];
  for (const [file, content] of Object.entries(files)) {
    const p = path.join(GENERATED_DIR, file);
    if (!fs.existsSync(p) || fs.readFileSync(p, 'utf8') !== content) stale.push(file);
  }
  for (const existing of fs.existsSync(GENERATED_DIR) ? fs.readdirSync(GENERATED_DIR) : []) {
    if (!(existing in files)) stale.push(existing);
  }
  return stale;
}

module.exports = {
  SOLC_VERSION,
  SETTINGS,
  SOURCE_DIR,
  GENERATED_DIR,
  PUBLIC_CONTRACTS,
  TEST_CONTRACTS,
  compileContracts,
  renderGenerated,
  writeGenerated,
  staleGenerated,
};

if (require.main === module) {
  const started = Date.now();
  if (process.argv.includes('--check')) {
    const stale = staleGenerated();
    if (stale.length > 0) {
      console.error(
        `stale generated files (run node libs/chain/contracts/scripts/compile.js): ${stale.join(', ')}`,
      );
      process.exit(1);
    }
    console.log(`generated artifacts are up to date (${Date.now() - started} ms)`);
  } else {
    const { files, warnings, contracts } = writeGenerated();
    for (const w of warnings) console.warn(w);
    for (const name of [...PUBLIC_CONTRACTS, ...TEST_CONTRACTS]) {
      const c = contracts[name];
      console.log(
        `${name.padEnd(28)} runtime ${String((c.deployedBytecode.length - 2) / 2).padStart(6)} bytes`,
      );
    }
    console.log(
      `wrote ${files.length} files to ${path.relative(process.cwd(), GENERATED_DIR)} in ${Date.now() - started} ms`,
    );
  }
}
