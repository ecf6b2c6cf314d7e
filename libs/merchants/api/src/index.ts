export * from './merchants.port';
export * from './merchant.commands';
export * from './merchants-api.module';
export * from './settings.controller';
export * from './settlement.controller';
export * from './admin.controller';
export * from './settings.dto';
