export * from './generated';
export * from './deployment';
export * from './known-contracts';
export * from './errors';
export * from './enums';
export * from './budget-window';
