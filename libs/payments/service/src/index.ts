export * from './payments.module';
