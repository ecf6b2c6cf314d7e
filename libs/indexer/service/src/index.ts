export * from './indexer.module';
