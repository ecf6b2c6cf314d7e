// Types for compile.js (plain CommonJS so it runs with bare `node`).
export interface CompiledContract {
  readonly name: string;
  readonly sourceName: string;
  readonly abi: readonly unknown[];
  readonly bytecode: string;
  readonly deployedBytecode: string;
}
export declare const SOLC_VERSION: string;
export declare const SETTINGS: Readonly<Record<string, unknown>>;
export declare const SOURCE_DIR: string;
export declare const GENERATED_DIR: string;
export declare const PUBLIC_CONTRACTS: readonly string[];
export declare const TEST_CONTRACTS: readonly string[];
export declare function compileContracts(): {
  readonly contracts: Readonly<Record<string, CompiledContract>>;
  readonly warnings: readonly string[];
};
export declare function renderGenerated(
  contracts: Readonly<Record<string, CompiledContract>>,
): Record<string, string>;
export declare function writeGenerated(): {
  readonly files: readonly string[];
  readonly warnings: readonly string[];
};
export declare function staleGenerated(): string[];
