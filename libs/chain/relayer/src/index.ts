export * from './relayer';
export * from './relayer-set';
export { decodeRevert, revertDataOf, UNKNOWN_REVERT, type RevertReason } from './revert';
