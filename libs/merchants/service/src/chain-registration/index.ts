export * from './merchant-chain-registration.module';
export * from './merchant-chain-registrar';
export * from './registration.store';
export * from './registry-epochs';
