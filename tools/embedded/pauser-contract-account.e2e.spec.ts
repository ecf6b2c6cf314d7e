import { ContractFactory, hashMessage, Wallet, type Interface, type InterfaceAbi } from 'ethers';
import solc from 'solc';
import { ANVIL_DEV_PRIVATE_KEYS, localChainProvider } from '@stablepay/local-chains';
import { createTestDatabase, type TestDatabase } from '@stablepay/testing';
import { type EmbeddedStack, startEmbedded } from './embedded';

/** An ERC-1271 account that approves exactly the digests its owner approved (a stand-in for a multisig). */
const SOURCE = `
pragma solidity ^0.8.24;
contract ApprovingAccount {
    mapping(bytes32 => bool) public approved;
    function approve(bytes32 digest) external { approved[digest] = true; }
    function isValidSignature(bytes32 digest, bytes calldata) external view returns (bytes4) {
        return approved[digest] ? bytes4(0x1626ba7e) : bytes4(0xffffffff);
    }
}`;

function compile(): { abi: InterfaceAbi; bytecode: string } {
  const input = {
    language: 'Solidity',
    sources: { 'ApprovingAccount.sol': { content: SOURCE } },
    settings: { evmVersion: 'cancun', outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object'] } } },
  };
  const output = JSON.parse(solc.compile(JSON.stringify(input))) as {
    contracts: Record<string, Record<string, { abi: InterfaceAbi; evm: { bytecode: { object: string } } }>>;
  };
  const c = output.contracts['ApprovingAccount.sol']?.['ApprovingAccount'];
  if (!c) throw new Error('compilation failed');
  return { abi: c.abi, bytecode: '0x' + c.evm.bytecode.object };
}

const ADMIN_TOKEN = 'admin-token-for-tests-0123456789';

describe('pause declaration by a contract account (ERC-1271 on every supported chain)', () => {
  let db: TestDatabase;
  let stack: EmbeddedStack;
  let accountAddress: string;
  let approveOn: (chainIndex: number, digest: string) => Promise<void>;

  beforeAll(async () => {
    db = await createTestDatabase();
    stack = await startEmbedded({
      env: { DATABASE_URL: db.url, PORT: '0', LOG_LEVEL: 'error', ADMIN_TOKEN },
      dataDir: 'memory',
      localChains: true,
    });
    const { abi, bytecode } = compile();
    const chains = stack.chains?.chains ?? [];
    expect(chains.length).toBe(2);
    // A fresh deployer's first contract lands at the same address on both chains, like a real multi-chain wallet.
    const deployerKey = Wallet.createRandom().privateKey;
    const funder = ANVIL_DEV_PRIVATE_KEYS[9];
    const contracts: Array<{ approve: (digest: string) => Promise<void> }> = [];
    for (const chain of chains) {
      const provider = localChainProvider(chain.rpcUrl, chain.chainId);
      const deployer = new Wallet(deployerKey, provider);
      await (
        await new Wallet(funder, provider).sendTransaction({ to: deployer.address, value: 10n ** 18n })
      ).wait();
      const contract = await new ContractFactory(abi, bytecode, deployer).deploy();
      await contract.waitForDeployment();
      accountAddress = await contract.getAddress();
      const iface = contract.interface as Interface;
      contracts.push({
        approve: async (digest) => {
          await (
            await deployer.sendTransaction({
              to: accountAddress,
              data: iface.encodeFunctionData('approve', [digest]),
            })
          ).wait();
        },
      });
    }
    approveOn = (i, digest) => contracts[i]?.approve(digest) ?? Promise.reject(new Error('no chain'));
    // The merchant needs a signer before declaring a pauser.
    await fetch(`${stack.url}/settings`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.demoApiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ merchant_signer: Wallet.createRandom().address }),
    });
  });

  afterAll(async () => {
    await stack?.stop();
    await db?.drop();
  });

  const declare = async (apiKey = stack.demoApiKey) => {
    const pauser = (await (
      await fetch(`${stack.url}/settings/pauser`, {
        headers: { authorization: `Bearer ${apiKey}` },
      })
    ).json()) as { declaration_message: string };
    const res = await fetch(`${stack.url}/settings/pauser`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      // A contract account has no key: the signature bytes are whatever its wallet software produces.
      body: JSON.stringify({ merchant_pauser: accountAddress, signature: '0x' + '11'.repeat(65) }),
    });
    return {
      status: res.status,
      body: (await res.json()) as Record<string, unknown>,
      message: pauser.declaration_message,
    };
  };

  it('refuses when the contract approves the message on only one of the supported chains', async () => {
    const { message } = await declare();
    await approveOn(0, hashMessage(message));
    const res = await declare();
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: { type: 'cannot_process', code: 'pauser_control_unproven' } });
  });

  it("refuses a live merchant's contract pauser approved on this test deployment's chains (not the merchant's)", async () => {
    const created = (await (
      await fetch(`${stack.url}/admin/merchants`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'Live Co', mode: 'live' }),
      })
    ).json()) as { api_key: string };
    const signer = await fetch(`${stack.url}/settings`, {
      method: 'POST',
      headers: { authorization: `Bearer ${created.api_key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ merchant_signer: Wallet.createRandom().address }),
    });
    expect(signer.status).toBe(200);
    const { message } = await declare(created.api_key);
    await approveOn(0, hashMessage(message));
    await approveOn(1, hashMessage(message));
    const res = await declare(created.api_key);
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: { type: 'cannot_process', code: 'pauser_control_unproven' } });
  });

  it('accepts once the contract approves the message on every supported chain', async () => {
    const { message } = await declare();
    await approveOn(1, hashMessage(message));
    const res = await declare();
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ merchant_pauser: accountAddress });
  });
});
