export * from './settlement.module';
