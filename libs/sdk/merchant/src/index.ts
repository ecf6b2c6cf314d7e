export * from './signing';
export * from './webhooks';
export {
  quoteHash,
  toSignTypedDataV4Payload,
  verifyTypedDataSigner,
  type RequestKind,
  type TypedData,
} from '@stablepay/evm';
export { DomainError } from '@stablepay/util';
