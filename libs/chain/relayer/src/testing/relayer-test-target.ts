import solc from 'solc';
import { ContractFactory, Interface, type JsonFragment, type Signer } from 'ethers';

/**
 * A tiny contract with custom errors for the relayer's tests, compiled from source with the npm solc compiler.
 * Tests only: the real contracts (and their test stablecoin) live in @stablepay/contracts.
 */
export const RELAYER_TEST_TARGET_SOURCE = `
// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

contract RelayerTestTarget {
    error ChargeAmountExceedsCap(uint256 amount, uint256 cap);
    error Blocked(address caller);
    error NotInTheCallerAbi(uint256 code);

    event Pinged(address indexed by, uint256 count);

    uint256 public constant CAP = 1000;
    uint256 public count;
    bool public blocked;

    function ping() external {
        if (blocked) revert Blocked(msg.sender);
        count += 1;
        emit Pinged(msg.sender, count);
    }

    function charge(uint256 amount) external {
        if (amount > CAP) revert ChargeAmountExceedsCap(amount, CAP);
        count += 1;
    }

    function setBlocked(bool value) external {
        blocked = value;
    }

    function failWithReason(bool fail) external {
        require(!fail, "plain reason");
        count += 1;
    }

    function failWithErrorOutsideAbi() external {
        if (count < type(uint256).max) revert NotInTheCallerAbi(7);
        count += 1;
    }
}
`;

interface SolcOutput {
  readonly errors?: readonly { readonly severity: string; readonly formattedMessage: string }[];
  readonly contracts?: Record<
    string,
    Record<
      string,
      { readonly abi: JsonFragment[]; readonly evm: { readonly bytecode: { readonly object: string } } }
    >
  >;
}

export interface CompiledContract {
  readonly abi: JsonFragment[];
  readonly bytecode: string;
}

export function compileRelayerTestTarget(): CompiledContract {
  const input = {
    language: 'Solidity',
    sources: { 'RelayerTestTarget.sol': { content: RELAYER_TEST_TARGET_SOURCE } },
    settings: {
      // An EVM version every supported chain runs (solc defaults to the newest fork).
      evmVersion: 'cancun',
      optimizer: { enabled: true, runs: 200 },
      outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object'] } },
    },
  };
  const compile = solc.compile as (input: string) => string;
  const output = JSON.parse(compile(JSON.stringify(input))) as SolcOutput;
  const failures = (output.errors ?? []).filter((e) => e.severity === 'error');
  if (failures.length > 0) throw new Error(failures.map((e) => e.formattedMessage).join('\n'));
  const contract = output.contracts?.['RelayerTestTarget.sol']?.['RelayerTestTarget'];
  if (contract === undefined) throw new Error('solc produced no RelayerTestTarget');
  return { abi: contract.abi, bytecode: `0x${contract.evm.bytecode.object}` };
}

export async function deployRelayerTestTarget(
  deployer: Signer,
  compiled: CompiledContract,
): Promise<{ address: string; iface: Interface }> {
  const factory = new ContractFactory(compiled.abi, compiled.bytecode, deployer);
  const contract = await factory.deploy();
  await contract.waitForDeployment();
  return { address: await contract.getAddress(), iface: Interface.from(compiled.abi) };
}
