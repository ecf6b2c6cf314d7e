export * from './reports.port';
export * from './report-columns';
export * from './reports.controller';
export * from './reports-api.module';
