// SPDX-License-Identifier: UNLICENSED
pragma solidity 0.8.37;

import {StablepayEip712} from "./common/StablepayEip712.sol";
import {ReentrancyGuard} from "./common/ReentrancyGuard.sol";
import {SafeTokenTransfer} from "./common/SafeTokenTransfer.sol";
import {StablepayRegistry} from "./StablepayRegistry.sol";

/// @title PayoutDeposit
/// @notice A payout customer's deposit contract (Payouts, beta). The customer sends any ERC-20 to its CREATE2
/// address, long before it exists; the PayoutDepositFactory deploys an EIP-1167 clone of this implementation there
/// on the first sweep. The address binds the merchant, the customer and the off-ramp address, so whatever arrives
/// can leave in exactly two ways:
///   - `sweep(token, amount, payoutId)`: exactly `amount` of `token` to the off-ramp bound into the address, once
///     per `payoutId` (the payout it forwards). Operator only (or the factory on its behalf), so sanctions
///     screening always comes first. The amount is bounded because the address is shared by the customer's
///     payouts: a deposit the operator will not forward (a flagged sender's, one no payout waits for) stays put
///     while the others are swept around it. The payout id makes a retried sweep of the same payout fail instead
///     of moving a second payout's (or held) funds, and lets the retry find its own `PayoutSwept`.
///   - `refund(token, to, amount, payoutId, ...)`: exactly `amount` of `token` to a destination the MERCHANT signed
///     (`PayoutRefund`, which names the payout), once per `payoutId`, submitted by the operator (screening first
///     again). Bounded as the sweep is, for the same reason: a refund returns one held payout's deposit, never the
///     balance the customer's other payouts are waiting on. A payout is swept or refunded, never both.
///   The operator key alone can therefore never send funds anywhere but the off-ramp; the merchant key alone cannot
///   move anything.
/// The native coin is not handled: the clone has no receive function, and coin sent before deployment stays here.
/// @dev Merchant signatures are EIP-712 with verifyingContract = this deposit (the clone's address), name the
/// merchant's registry epoch (revocable at once), are single-use and carry a deadline at most
/// MAX_SIGNATURE_HORIZON ahead (as for PaymentDeposit).
contract PayoutDeposit is StablepayEip712, ReentrancyGuard {
    using SafeTokenTransfer for address;

    bytes32 public constant PAYOUT_REFUND_TYPEHASH = keccak256(
        "PayoutRefund(bytes32 payoutId,address token,address to,uint256 amount,uint256 epoch,uint256 deadline)"
    );

    /// @notice The PayoutDepositFactory that deployed the implementation (and so every clone).
    address public immutable factory;
    StablepayRegistry public immutable registry;
    address private immutable _implementation;

    bytes32 public merchantId;
    bytes32 public customerId;
    /// @notice Where `sweep` sends funds; bound into this contract's address, never changed.
    address public offRamp;
    bool private _initialized;
    /// @notice EIP-712 digests already used (replay protection for merchant signatures).
    mapping(bytes32 digest => bool) public signatureUsed;
    /// @notice Payout ids already swept: one sweep per payout.
    mapping(bytes32 payoutId => bool) public swept;
    /// @notice Payout ids already refunded: one refund per payout, and a refunded payout is never swept (nor the
    /// reverse), so its amount cannot leave twice.
    mapping(bytes32 payoutId => bool) public refunded;

    /// @dev The deposit's address already names the customer and the off-ramp; `payoutId` is indexed instead so a
    /// retry can ask for its own sweep.
    event PayoutSwept(
        bytes32 indexed customerId,
        address indexed token,
        bytes32 indexed payoutId,
        address offRamp,
        uint256 amount,
        uint256 received
    );
    /// @dev Indexed by payout id as PayoutSwept is, so a retried refund finds its own.
    event PayoutRefunded(
        bytes32 indexed customerId,
        address indexed token,
        bytes32 indexed payoutId,
        address to,
        uint256 amount,
        uint256 received
    );

    error NotFactory(address caller);
    error NotOperator(address caller);
    error NotADeposit();
    error AlreadyInitialized();
    error ZeroAddress();
    error ZeroAmount();
    error ZeroPayoutId();
    error AlreadySwept(bytes32 payoutId);
    error AlreadyRefunded(bytes32 payoutId);
    error InvalidDestination(address to);
    error AmountExceedsAvailable(uint256 amount, uint256 available);
    error SignatureAlreadyUsed(bytes32 digest);
    error BalanceDeltaMismatch(uint256 expected, uint256 actual);

    constructor(StablepayRegistry registry_) {
        factory = msg.sender;
        registry = registry_;
        _implementation = address(this);
        // The implementation itself can never be initialised.
        _initialized = true;
    }

    /// @notice Called by the factory in the deploying transaction.
    function initialize(bytes32 merchantId_, bytes32 customerId_, address offRamp_) external {
        if (msg.sender != factory) revert NotFactory(msg.sender);
        if (_initialized) revert AlreadyInitialized();
        if (offRamp_ == address(0)) revert ZeroAddress();
        _initialized = true;
        merchantId = merchantId_;
        customerId = customerId_;
        offRamp = offRamp_;
    }

    /// @notice Operator (or the factory for it): sends exactly `amount` of `token` to the off-ramp, once per
    /// `payoutId`. Less than `amount` at the address reverts (AmountExceedsAvailable): a short balance is never
    /// topped up from other funds, and never swept partially.
    /// @return received what the off-ramp received (less than `amount` for a fee-on-transfer token).
    function sweep(address token, uint256 amount, bytes32 payoutId) external nonReentrant returns (uint256 received) {
        _requireClone();
        _requireOperatorOrFactory();
        if (amount == 0) revert ZeroAmount();
        if (payoutId == bytes32(0)) revert ZeroPayoutId();
        _requireUnsettled(payoutId);
        uint256 available = token.balanceOf(address(this));
        if (amount > available) revert AmountExceedsAvailable(amount, available);
        swept[payoutId] = true;
        address to = offRamp;
        received = _push(token, to, amount);
        emit PayoutSwept(customerId, token, payoutId, to, amount, received);
    }

    /// @notice Merchant-signed (PayoutRefund), operator-submitted: returns exactly `amount` of `token` to `to` (the
    /// held payout's sender), once per `payoutId`. The destination is the merchant's, never the operator's choice;
    /// the amount and payout are signed too, so a signature returns one payout's deposit and cannot be replayed
    /// for another payout, nor for the same one.
    /// @return received what `to` received (less than `amount` for a fee-on-transfer token).
    function refund(
        address token,
        address to,
        uint256 amount,
        bytes32 payoutId,
        uint256 deadline,
        bytes calldata signature
    ) external nonReentrant returns (uint256 received) {
        _requireClone();
        _requireOperatorOrFactory();
        if (amount == 0) revert ZeroAmount();
        if (payoutId == bytes32(0)) revert ZeroPayoutId();
        if (to == address(0) || to == address(this)) revert InvalidDestination(to);
        _requireUnsettled(payoutId);
        uint256 available = token.balanceOf(address(this));
        if (amount > available) revert AmountExceedsAvailable(amount, available);
        (address signer, uint256 epoch) = registry.merchantAuth(merchantId);
        _checkDeadline(deadline);
        bytes32 digest = _hashTypedData(
            keccak256(abi.encode(PAYOUT_REFUND_TYPEHASH, payoutId, token, to, amount, epoch, deadline))
        );
        if (signatureUsed[digest]) revert SignatureAlreadyUsed(digest);
        _requireSigner(digest, signature, signer);
        signatureUsed[digest] = true;
        refunded[payoutId] = true;
        received = _push(token, to, amount);
        emit PayoutRefunded(customerId, token, payoutId, to, amount, received);
    }

    /// @notice The full EIP-712 digest of a PayoutRefund, for signers and preflight checks to compare against.
    function hashRefund(
        address token,
        address to,
        uint256 amount,
        bytes32 payoutId,
        uint256 epoch,
        uint256 deadline
    ) external view returns (bytes32) {
        return _hashTypedData(
            keccak256(abi.encode(PAYOUT_REFUND_TYPEHASH, payoutId, token, to, amount, epoch, deadline))
        );
    }

    /// @dev A payout's deposit leaves once: to the off-ramp or back to its sender.
    function _requireUnsettled(bytes32 payoutId) private view {
        if (swept[payoutId]) revert AlreadySwept(payoutId);
        if (refunded[payoutId]) revert AlreadyRefunded(payoutId);
    }

    function _requireClone() private view {
        if (address(this) == _implementation) revert NotADeposit();
    }

    function _requireOperatorOrFactory() private view {
        if (msg.sender != factory && msg.sender != registry.operator()) revert NotOperator(msg.sender);
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
