import { type DomainError, cannotProcess, conflict, validationError } from '@stablepay/util';

/**
 * A PaymentDeposit revert (in simulation: nothing was sent) as the API error a merchant acts on. Preflight catches
 * these before the simulation in the normal case; this is the same answer when the chain moved in between (a flag,
 * an expiry, a signature used by someone else's submission).
 */
export function chainRejection(errorName: string): DomainError {
  switch (errorName) {
    case 'SignatureAlreadyUsed':
      return conflict(
        'signature_already_used',
        'This signature was already used on chain (each merchant signature is single-use).',
        'signature',
      );
    case 'InvalidSignature':
      return cannotProcess(
        'invalid_signature',
        "The contract refused the signature: not the merchant signer's at the current epoch.",
        'signature',
      );
    case 'SignatureExpired':
      return cannotProcess('signature_expired', "The signature's deadline has passed.", 'deadline');
    case 'DeadlineTooFar':
      return cannotProcess(
        'signature_deadline_too_far',
        'The deadline lies more than 7 days ahead.',
        'deadline',
      );
    case 'PaymentIsFlagged':
      return cannotProcess(
        'payment_flagged',
        'This payment is flagged by sanctions screening and permanently halted.',
      );
    case 'AuthorizationExpired':
      return cannotProcess(
        'authorization_expired',
        'The escrow authorization expired; it can no longer be captured (refund, or recover to the payer).',
      );
    case 'AuthorizationNotExpired':
      return conflict('authorization_not_expired', 'The escrow authorization has not expired yet.');
    case 'AmountExceedsEscrow':
      return validationError('amount', 'amount exceeds the escrow left on chain.', 'amount_exceeds_escrow');
    case 'AmountExceedsAvailable':
      return validationError(
        'amount',
        'amount exceeds what the deposit holds of this token.',
        'amount_exceeds_balance',
      );
    case 'PayerNotFinal':
      return cannotProcess(
        'payer_not_final',
        "The payer's challenge period has not passed yet; retry once it has.",
      );
    case 'PayerUnknown':
      return cannotProcess('payer_unknown', 'The payer was disputed and no payer is attested now.');
    case 'PayerMismatch':
      return cannotProcess(
        'payer_mismatch',
        'The request names another payer than the attested one.',
        'payer',
      );
    case 'PayerAlreadyFinal':
      return conflict(
        'payer_already_final',
        "The payer's challenge period is over: the payer is final and can no longer be disputed.",
      );
    case 'PayerNotDisputed':
      return conflict(
        'payer_not_disputed',
        'A payer stands on chain (the merchant has not disputed it); only a disputed payer can be attested again.',
        'payer',
      );
    case 'PayerOwnedToken':
      return cannotProcess(
        'payer_owned_token',
        'Funds in the payment token belong to the payer: use recover.',
        'token',
      );
    case 'NothingToRecover':
      return conflict('nothing_to_recover', 'The deposit holds nothing to return to the payer.');
    case 'NotEscrow':
      return conflict('payment_not_capturable', 'This deposit holds no escrow (not a TWO_STEP payment).');
    default:
      return cannotProcess('chain_rejected', `The deposit contract refused the call (${errorName}).`);
  }
}
