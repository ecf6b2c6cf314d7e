import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import {
  GENERATED_DIR,
  PUBLIC_CONTRACTS,
  TEST_CONTRACTS,
  compileContracts,
  renderGenerated,
} from '../scripts/compile';
import * as generated from './generated';
import * as doubles from './generated/test-doubles';

describe('generated contract artifacts', () => {
  // One in-memory compile of solidity/ with the pinned npm solc (about 10 s with viaIR).
  const { contracts, warnings } = compileContracts();
  const rendered = renderGenerated(contracts);

  it('are exactly what a fresh compile of the Solidity sources produces (run scripts/compile.js if this fails)', () => {
    const committed = readdirSync(GENERATED_DIR).sort();
    expect(committed).toEqual(Object.keys(rendered).sort());
    for (const [file, content] of Object.entries(rendered)) {
      expect({ file, same: readFileSync(join(GENERATED_DIR, file), 'utf8') === content }).toEqual({
        file,
        same: true,
      });
    }
  });

  it('export the bytecode the compiler produced for every contract', () => {
    const exported: Record<string, unknown> = { ...generated, ...doubles };
    for (const name of [...PUBLIC_CONTRACTS, ...TEST_CONTRACTS]) {
      const c = contracts[name];
      expect(c).toBeDefined();
      expect(exported[`${name}Bytecode`]).toBe(c?.bytecode);
      expect(exported[`${name}DeployedBytecode`]).toBe(c?.deployedBytecode);
      expect(exported[`${name}Abi`]).toEqual(c?.abi);
    }
  });

  it('compile without warnings, and every runtime fits the 24,576-byte contract size limit', () => {
    expect(warnings).toEqual([]);
    for (const c of Object.values(contracts))
      expect((c.deployedBytecode.length - 2) / 2).toBeLessThanOrEqual(24_576);
  });
});

describe('README gas table', () => {
  it('has a measured row for every external state-changing function of every deployed contract', () => {
    const readme = readFileSync(join(__dirname, '..', 'README.md'), 'utf8');
    const table = readme.slice(
      readme.indexOf('<!-- gas-table:start -->'),
      readme.indexOf('<!-- gas-table:end -->'),
    );
    const rows = new Set(
      [...table.matchAll(/^\| ([^|]+) \| `([^`]+)` \|[^|]*\| ([\d,]+) \|$/gm)].map(
        (m) => `${m[1]?.trim()}.${m[2]}`,
      ),
    );
    const missing: string[] = [];
    for (const name of PUBLIC_CONTRACTS) {
      const abi = (generated as Record<string, unknown>)[`${name}Abi`] as readonly {
        type: string;
        name?: string;
        stateMutability?: string;
      }[];
      for (const item of abi) {
        if (item.type !== 'function' || item.stateMutability === 'view' || item.stateMutability === 'pure')
          continue;
        // Runs inside the factory's deployDeposit (and the payout factory's first sweep).
        if ((name === 'PaymentDeposit' || name === 'PayoutDeposit') && item.name === 'initialize') continue;
        if (!rows.has(`${name}.${item.name}`)) missing.push(`${name}.${item.name}`);
      }
    }
    expect(missing).toEqual([]);
  });
});
