export * from './colors';
export * from './html';
export * from './shell';
export * from './qr';
export * from './pay-page';
