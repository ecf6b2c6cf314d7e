export * from './payouts.module';
