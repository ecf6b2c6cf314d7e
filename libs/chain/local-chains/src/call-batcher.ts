import solc from 'solc';
import { type Contract, ContractFactory, type JsonFragment, type Signer } from 'ethers';

/**
 * A call batcher for tests (what a Safe's multisend or a smart account does for a merchant wallet): every call in one
 * transaction, or none. Lets a test put several moves a contract allows anyone to submit (merchant-signed charges,
 * captures, refunds) into one transaction, as an integrator's own wallet may.
 */
const CALL_BATCHER_SOURCE = `
// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;
contract CallBatcher {
    function run(address[] calldata to, bytes[] calldata data) external {
        for (uint256 i = 0; i < to.length; i++) {
            (bool ok, bytes memory reason) = to[i].call(data[i]);
            if (!ok) assembly { revert(add(reason, 32), mload(reason)) }
        }
    }
}
`;

interface SolcOutput {
  readonly contracts?: Record<
    string,
    Record<
      string,
      { readonly abi: JsonFragment[]; readonly evm: { readonly bytecode: { readonly object: string } } }
    >
  >;
}

/** Deploys a CallBatcher from `deployer`; `run(to[], data[])` sends every call in one transaction. */
export async function deployCallBatcher(deployer: Signer): Promise<Contract> {
  const input = {
    language: 'Solidity',
    sources: { 'CallBatcher.sol': { content: CALL_BATCHER_SOURCE } },
    settings: {
      // An EVM version every supported chain runs (solc defaults to the newest fork).
      evmVersion: 'cancun',
      outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object'] } },
    },
  };
  const compile = solc.compile as (input: string) => string;
  const output = JSON.parse(compile(JSON.stringify(input))) as SolcOutput;
  const compiled = output.contracts?.['CallBatcher.sol']?.['CallBatcher'];
  if (!compiled) throw new Error('solc produced no CallBatcher');
  const contract = await new ContractFactory(
    compiled.abi,
    `0x${compiled.evm.bytecode.object}`,
    deployer,
  ).deploy();
  await contract.waitForDeployment();
  return contract as Contract;
}
