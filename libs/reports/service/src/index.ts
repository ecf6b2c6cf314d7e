export * from './reports.gateway';
export * from './reports.module';
