export * from './commands.config';
export * from './patterns';
export * from './in-process.transport';
export * from './remote-error';
export * from './command-client';
export * from './command-server';
export * from './command-handler';
