export * from './generated';
export * from './deployment';
export * from './errors';
export * from './enums';
export * from './budget-window';
