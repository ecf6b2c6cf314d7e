// SPDX-License-Identifier: UNLICENSED
pragma solidity 0.8.37;

import {StablepayEip712} from "./common/StablepayEip712.sol";
import {ReentrancyGuard} from "./common/ReentrancyGuard.sol";
import {SafeTokenTransfer} from "./common/SafeTokenTransfer.sol";
import {StablepayRegistry} from "./StablepayRegistry.sol";

interface IPaymentFlags {
    function isFlagged(address deposit) external view returns (bool);
}

/// @title PaymentDeposit
/// @notice The per-payment deposit contract. The customer pays to its CREATE2 address before it exists; the
/// PaymentFactory then deploys an EIP-1167 clone of this implementation there and initialises it in the same
/// transaction: DIRECT forwards the funding amount to the merchant settlement address, TWO_STEP holds it in escrow
/// until a merchant-signed capture (to the settlement address bound at deployment, before the authorization
/// expiry) or refund (to the payer), or, after the authorization expiry, a reclaim to the payer.
///
/// The payer. The EVM cannot see who sent a plain ERC-20 transfer, so the payer is ATTESTED by the operator at
/// deployment (the sender the indexer observed) and only becomes FINAL after PAYER_CHALLENGE_PERIOD, during which
/// the merchant signer can dispute it (a DisputePayer signature clears it; only the cold admin key can attest it
/// again, restarting the period). Payer-owned funds (the escrow after expiry, everything of the payment token above
/// the escrow: over-deposit, abandoned deposit, stragglers) go only to the payer: refund needs the merchant's
/// signature naming that payer, recover and reclaim need the payer to be final. The operator key alone can
/// therefore move payer-owned funds only to a payer the merchant saw and let stand.
///
/// Rescue (merchant-signed, operator-submitted so screening and flagging always come first) moves only what is not
/// the payer's: tokens other than the payment token and the native coin. A flagged payment moves no funds at all.
/// @dev Merchant signatures are EIP-712 with verifyingContract = this deposit (the clone's address), name the
/// merchant's registry epoch (revocable at once), are single-use (the digest is burned on use) and carry a
/// deadline at most MAX_SIGNATURE_HORIZON ahead.
contract PaymentDeposit is StablepayEip712, ReentrancyGuard {
    using SafeTokenTransfer for address;

    /// DIRECT: forward on deployment. TWO_STEP: escrow. NONE: deploy only (abandoned deposit, strays): nothing
    /// is settled, recover and rescue apply.
    enum Method {
        DIRECT,
        TWO_STEP,
        NONE
    }

    struct Payment {
        bytes32 merchantId;
        bytes32 paymentId;
        address token;
        Method method;
        bool initialized;
        address payer;
        uint40 payerAttestedAt;
        uint40 authorizationExpiry;
        address settlement;
        uint256 escrowed;
    }

    /// @notice How long an attested payer can be disputed by the merchant before payer-owned funds may move to it.
    uint256 public constant PAYER_CHALLENGE_PERIOD = 1 days;
    /// @notice Bounds of a TWO_STEP authorization (from deployment): capture is possible until the expiry, after
    /// which the payer can reclaim.
    uint256 public constant MIN_AUTHORIZATION_PERIOD = 1 hours;
    uint256 public constant MAX_AUTHORIZATION_PERIOD = 30 days;

    bytes32 public constant CAPTURE_TYPEHASH =
        keccak256("Capture(bytes32 paymentId,address token,uint256 amount,uint256 epoch,uint256 deadline)");
    bytes32 public constant REFUND_TYPEHASH = keccak256(
        "Refund(bytes32 paymentId,address token,address payer,uint256 amount,uint256 epoch,uint256 deadline)"
    );
    bytes32 public constant RESCUE_TYPEHASH = keccak256(
        "Rescue(bytes32 paymentId,address token,address to,uint256 amount,uint256 epoch,uint256 deadline)"
    );
    bytes32 public constant DISPUTE_PAYER_TYPEHASH =
        keccak256("DisputePayer(bytes32 paymentId,address payer,uint256 epoch,uint256 deadline)");

    /// @notice The PaymentFactory that deployed the implementation (and so every clone).
    address public immutable factory;
    StablepayRegistry public immutable registry;
    address private immutable _implementation;

    Payment private _payment;
    /// @notice EIP-712 digests already used (replay protection for merchant signatures).
    mapping(bytes32 digest => bool) public signatureUsed;

    event PaymentSettled(
        bytes32 indexed paymentId, address indexed token, address indexed settlement, uint256 amount, uint256 received
    );
    event EscrowFunded(
        bytes32 indexed paymentId, address indexed token, address indexed payer, uint256 amount, uint256 authorizationExpiry
    );
    event PaymentCaptured(
        bytes32 indexed paymentId,
        address indexed token,
        address indexed settlement,
        uint256 amount,
        uint256 received,
        uint256 remainingEscrow
    );
    event PaymentRefunded(
        bytes32 indexed paymentId,
        address indexed token,
        address indexed payer,
        uint256 amount,
        uint256 received,
        uint256 remainingEscrow
    );
    event PaymentReclaimed(
        bytes32 indexed paymentId, address indexed token, address indexed payer, uint256 amount, uint256 received
    );
    event PaymentRescued(
        bytes32 indexed paymentId, address indexed token, address indexed to, uint256 amount, uint256 received
    );
    event PaymentRecovered(
        bytes32 indexed paymentId, address indexed token, address indexed payer, uint256 amount, uint256 received
    );
    /// @param finalAt when payer-owned funds may move to it (unless disputed before).
    event PayerAttested(bytes32 indexed paymentId, address indexed payer, uint256 finalAt);
    event PayerDisputed(bytes32 indexed paymentId, address indexed payer);

    error NotFactory(address caller);
    error NotOperator(address caller);
    error NotAdmin(address caller);
    error NotADeposit();
    error AlreadyInitialized();
    error ZeroAmount();
    error ZeroAddress();
    error InvalidAmount(uint256 amount);
    error InvalidDestination(address to);
    error InsufficientDeposit(uint256 balance, uint256 amount);
    error PaymentIsFlagged();
    error NotEscrow();
    error WrongToken(address token, address paymentToken);
    error AmountExceedsEscrow(uint256 amount, uint256 escrowed);
    error AmountExceedsAvailable(uint256 amount, uint256 available);
    error NothingToRecover();
    error SignatureAlreadyUsed(bytes32 digest);
    error BalanceDeltaMismatch(uint256 expected, uint256 actual);
    error NativeTransferFailed(address to);
    error InvalidAuthorizationExpiry(uint256 authorizationExpiry);
    error AuthorizationExpired(uint256 authorizationExpiry, uint256 timestamp);
    error AuthorizationNotExpired(uint256 authorizationExpiry, uint256 timestamp);
    error PayerMismatch(address signed, address recorded);
    error PayerNotFinal(uint256 finalAt, uint256 timestamp);
    error PayerAlreadyFinal(uint256 finalAt);
    error PayerUnknown();
    error PayerNotDisputed(address payer);
    error PayerOwnedToken(address token);

    constructor(StablepayRegistry registry_) {
        factory = msg.sender;
        registry = registry_;
        _implementation = address(this);
        // The implementation itself can never be initialised.
        _payment.initialized = true;
        _payment.method = Method.NONE;
    }

    /// @notice Called by the factory in the deploying transaction. Records the payment, attests the payer and
    /// settles it. `authorizationExpiry` is for TWO_STEP only (0 otherwise).
    /// @return received what the settlement address received (DIRECT; fee-on-transfer aware), else 0.
    function initialize(
        bytes32 merchantId,
        bytes32 paymentId,
        Method method,
        address token,
        address payer,
        address settlement,
        uint256 amount,
        uint256 authorizationExpiry
    ) external nonReentrant returns (uint256 received) {
        if (msg.sender != factory) revert NotFactory(msg.sender);
        Payment storage p = _payment;
        if (p.initialized) revert AlreadyInitialized();
        p.merchantId = merchantId;
        p.paymentId = paymentId;
        p.token = token;
        p.method = method;
        p.initialized = true;
        _attest(p, payer);
        if (method == Method.TWO_STEP) {
            if (
                authorizationExpiry < block.timestamp + MIN_AUTHORIZATION_PERIOD
                    || authorizationExpiry > block.timestamp + MAX_AUTHORIZATION_PERIOD
            ) revert InvalidAuthorizationExpiry(authorizationExpiry);
            p.authorizationExpiry = uint40(authorizationExpiry);
        } else if (authorizationExpiry != 0) {
            revert InvalidAuthorizationExpiry(authorizationExpiry);
        }
        if (method == Method.NONE) {
            if (amount != 0) revert InvalidAmount(amount);
            return 0;
        }
        if (amount == 0) revert ZeroAmount();
        uint256 balance = token.balanceOf(address(this));
        if (balance < amount) revert InsufficientDeposit(balance, amount);
        if (method == Method.DIRECT) {
            received = _push(token, settlement, amount);
            emit PaymentSettled(paymentId, token, settlement, amount, received);
        } else {
            p.settlement = settlement;
            p.escrowed = amount;
            emit EscrowFunded(paymentId, token, payer, amount, authorizationExpiry);
        }
    }

    /// @notice Merchant-signed (Capture): moves `amount` of the escrow to the settlement address bound at
    /// deployment, before the authorization expiry. Anyone may submit the signature. Partial captures are allowed.
    function capture(address token, uint256 amount, uint256 deadline, bytes calldata signature)
        external
        nonReentrant
        returns (uint256 received)
    {
        Payment storage p = _payment;
        _checkEscrowMove(p, token, amount);
        if (block.timestamp >= p.authorizationExpiry) {
            revert AuthorizationExpired(p.authorizationExpiry, block.timestamp);
        }
        (address signer, uint256 epoch) = registry.merchantAuth(p.merchantId);
        _useMerchantSignature(
            keccak256(abi.encode(CAPTURE_TYPEHASH, p.paymentId, token, amount, epoch, deadline)),
            signer,
            deadline,
            signature
        );
        uint256 remaining = p.escrowed - amount;
        p.escrowed = remaining;
        address settlement = p.settlement;
        received = _push(token, settlement, amount);
        emit PaymentCaptured(p.paymentId, token, settlement, amount, received, remaining);
    }

    /// @notice Merchant-signed (Refund): returns `amount` of the escrow to the payer. The signature names the
    /// payer, so the merchant consents to the destination the operator attested; it works before and after the
    /// authorization expiry.
    function refund(address token, address payer, uint256 amount, uint256 deadline, bytes calldata signature)
        external
        nonReentrant
        returns (uint256 received)
    {
        Payment storage p = _payment;
        _checkEscrowMove(p, token, amount);
        if (p.payer == address(0)) revert PayerUnknown();
        if (payer != p.payer) revert PayerMismatch(payer, p.payer);
        (address signer, uint256 epoch) = registry.merchantAuth(p.merchantId);
        _useMerchantSignature(
            keccak256(abi.encode(REFUND_TYPEHASH, p.paymentId, token, payer, amount, epoch, deadline)),
            signer,
            deadline,
            signature
        );
        uint256 remaining = p.escrowed - amount;
        p.escrowed = remaining;
        received = _push(token, payer, amount);
        emit PaymentRefunded(p.paymentId, token, payer, amount, received, remaining);
    }

    /// @notice Anyone, after the authorization expiry: the whole remaining escrow goes back to the (final) payer.
    function reclaim() external nonReentrant returns (uint256 amount, uint256 received) {
        Payment storage p = _payment;
        if (p.method != Method.TWO_STEP) revert NotEscrow();
        _requireNotFlagged();
        if (block.timestamp < p.authorizationExpiry) {
            revert AuthorizationNotExpired(p.authorizationExpiry, block.timestamp);
        }
        amount = p.escrowed;
        if (amount == 0) revert NothingToRecover();
        address payer = _finalPayer(p);
        p.escrowed = 0;
        address token = p.token;
        received = _push(token, payer, amount);
        emit PaymentReclaimed(p.paymentId, token, payer, amount, received);
    }

    /// @notice Merchant-signed (Rescue), submitted by the operator only (so screening and a flag always come
    /// first; a merchant cannot race a flag): moves stranded funds that are not the payer's - any token other than
    /// the payment token, or the native coin (token = address(0)) - to the signed `to`.
    function rescue(address token, address to, uint256 amount, uint256 deadline, bytes calldata signature)
        external
        nonReentrant
        returns (uint256 received)
    {
        _requireClone();
        if (msg.sender != registry.operator()) revert NotOperator(msg.sender);
        Payment storage p = _payment;
        _requireNotFlagged();
        if (token == p.token) revert PayerOwnedToken(token);
        if (amount == 0) revert ZeroAmount();
        if (to == address(0) || to == address(this)) revert InvalidDestination(to);
        uint256 available = token == address(0) ? address(this).balance : token.balanceOf(address(this));
        if (amount > available) revert AmountExceedsAvailable(amount, available);
        (address signer, uint256 epoch) = registry.merchantAuth(p.merchantId);
        _useMerchantSignature(
            keccak256(abi.encode(RESCUE_TYPEHASH, p.paymentId, token, to, amount, epoch, deadline)),
            signer,
            deadline,
            signature
        );
        if (token == address(0)) {
            (bool ok,) = to.call{value: amount}("");
            if (!ok) revert NativeTransferFailed(to);
            received = amount;
        } else {
            received = _push(token, to, amount);
        }
        emit PaymentRescued(p.paymentId, token, to, amount, received);
    }

    /// @notice Operator only: returns everything above the escrow, in the payment token, to the final payer
    /// (over-deposit, abandoned checkout, stragglers). The destination is derived, never supplied.
    function recover() external nonReentrant returns (uint256 amount, uint256 received) {
        _requireClone();
        if (msg.sender != registry.operator()) revert NotOperator(msg.sender);
        Payment storage p = _payment;
        _requireNotFlagged();
        address token = p.token;
        uint256 balance = token.balanceOf(address(this));
        amount = balance > p.escrowed ? balance - p.escrowed : 0;
        if (amount == 0) revert NothingToRecover();
        address payer = _finalPayer(p);
        received = _push(token, payer, amount);
        emit PaymentRecovered(p.paymentId, token, payer, amount, received);
    }

    /// @notice Merchant-signed (DisputePayer), anyone submits, within PAYER_CHALLENGE_PERIOD of the attestation:
    /// clears the attested payer. Only the admin can attest one again.
    function disputePayer(address payer, uint256 deadline, bytes calldata signature) external nonReentrant {
        _requireClone();
        Payment storage p = _payment;
        if (p.payer == address(0)) revert PayerUnknown();
        if (payer != p.payer) revert PayerMismatch(payer, p.payer);
        uint256 finalAt = uint256(p.payerAttestedAt) + PAYER_CHALLENGE_PERIOD;
        if (block.timestamp >= finalAt) revert PayerAlreadyFinal(finalAt);
        (address signer, uint256 epoch) = registry.merchantAuth(p.merchantId);
        _useMerchantSignature(
            keccak256(abi.encode(DISPUTE_PAYER_TYPEHASH, p.paymentId, payer, epoch, deadline)),
            signer,
            deadline,
            signature
        );
        p.payer = address(0);
        p.payerAttestedAt = 0;
        emit PayerDisputed(p.paymentId, payer);
    }

    /// @notice Admin (cold key) only, and only after the merchant disputed the payer: attests the right one, with
    /// a fresh challenge period (so the admin alone can never replace a payer that stands).
    function attestPayer(address payer) external nonReentrant {
        _requireClone();
        if (msg.sender != registry.admin()) revert NotAdmin(msg.sender);
        Payment storage p = _payment;
        if (p.payer != address(0)) revert PayerNotDisputed(p.payer);
        _attest(p, payer);
    }

    /// @notice Everything recorded about this payment.
    function payment() external view returns (Payment memory) {
        return _payment;
    }

    /// @notice When payer-owned funds may move to the attested payer (0 when no payer is attested).
    function payerFinalAt() external view returns (uint256) {
        Payment storage p = _payment;
        return p.payer == address(0) ? 0 : uint256(p.payerAttestedAt) + PAYER_CHALLENGE_PERIOD;
    }

    /// @notice Whether the operator flagged this payment (no funds move, permanently).
    function flagged() public view returns (bool) {
        return IPaymentFlags(factory).isFlagged(address(this));
    }

    /// @notice Full EIP-712 digests, for signers and preflight checks to compare against.
    function hashCapture(address token, uint256 amount, uint256 epoch, uint256 deadline)
        external
        view
        returns (bytes32)
    {
        return _hashTypedData(
            keccak256(abi.encode(CAPTURE_TYPEHASH, _payment.paymentId, token, amount, epoch, deadline))
        );
    }

    function hashRefund(address token, address payer, uint256 amount, uint256 epoch, uint256 deadline)
        external
        view
        returns (bytes32)
    {
        return _hashTypedData(
            keccak256(abi.encode(REFUND_TYPEHASH, _payment.paymentId, token, payer, amount, epoch, deadline))
        );
    }

    function hashRescue(address token, address to, uint256 amount, uint256 epoch, uint256 deadline)
        external
        view
        returns (bytes32)
    {
        return _hashTypedData(
            keccak256(abi.encode(RESCUE_TYPEHASH, _payment.paymentId, token, to, amount, epoch, deadline))
        );
    }

    function hashDisputePayer(address payer, uint256 epoch, uint256 deadline) external view returns (bytes32) {
        return _hashTypedData(
            keccak256(abi.encode(DISPUTE_PAYER_TYPEHASH, _payment.paymentId, payer, epoch, deadline))
        );
    }

    function _attest(Payment storage p, address payer) private {
        if (payer == address(0)) revert ZeroAddress();
        p.payer = payer;
        p.payerAttestedAt = uint40(block.timestamp);
        emit PayerAttested(p.paymentId, payer, block.timestamp + PAYER_CHALLENGE_PERIOD);
    }

    function _finalPayer(Payment storage p) private view returns (address payer) {
        payer = p.payer;
        if (payer == address(0)) revert PayerUnknown();
        uint256 finalAt = uint256(p.payerAttestedAt) + PAYER_CHALLENGE_PERIOD;
        if (block.timestamp < finalAt) revert PayerNotFinal(finalAt, block.timestamp);
    }

    function _checkEscrowMove(Payment storage p, address token, uint256 amount) private view {
        if (p.method != Method.TWO_STEP) revert NotEscrow();
        _requireNotFlagged();
        if (token != p.token) revert WrongToken(token, p.token);
        if (amount == 0) revert ZeroAmount();
        if (amount > p.escrowed) revert AmountExceedsEscrow(amount, p.escrowed);
    }

    function _requireClone() private view {
        if (address(this) == _implementation) revert NotADeposit();
    }

    function _requireNotFlagged() private view {
        if (flagged()) revert PaymentIsFlagged();
    }

    function _useMerchantSignature(bytes32 structHash, address signer, uint256 deadline, bytes calldata signature)
        private
    {
        _checkDeadline(deadline);
        bytes32 digest = _hashTypedData(structHash);
        if (signatureUsed[digest]) revert SignatureAlreadyUsed(digest);
        _requireSigner(digest, signature, signer);
        signatureUsed[digest] = true;
    }

    /// @dev Sends `amount`, checks this contract's balance fell by exactly `amount`, returns what `to` received.
    function _push(address token, address to, uint256 amount) private returns (uint256 received) {
        uint256 selfBefore = token.balanceOf(address(this));
        uint256 toBefore = token.balanceOf(to);
        token.safeTransfer(to, amount);
        uint256 selfAfter = token.balanceOf(address(this));
        uint256 sent = selfBefore >= selfAfter ? selfBefore - selfAfter : 0;
        if (sent != amount) revert BalanceDeltaMismatch(amount, sent);
        uint256 toAfter = token.balanceOf(to);
        received = toAfter >= toBefore ? toAfter - toBefore : 0;
    }
}
