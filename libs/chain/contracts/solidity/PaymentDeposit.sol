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
/// until a merchant-signed capture (to the settlement address bound at deployment) or refund (to the payer
/// recorded at deployment). Merchant-signed rescue moves stranded funds (another token, a straggler above the
/// escrow, native coin) to a signed destination; operator-called recover returns whatever exceeds the escrow in
/// the payment token to the recorded payer (over-deposit, abandoned checkout): its destination is never supplied.
/// A flagged payment moves no funds at all.
/// @dev Merchant signatures are EIP-712 with verifyingContract = this deposit (the clone's address) and are
/// single-use: the digest is burned on use, and every message carries a deadline.
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
        address settlement;
        uint256 escrowed;
    }

    bytes32 public constant CAPTURE_TYPEHASH =
        keccak256("Capture(bytes32 paymentId,address token,uint256 amount,uint256 deadline)");
    bytes32 public constant REFUND_TYPEHASH =
        keccak256("Refund(bytes32 paymentId,address token,uint256 amount,uint256 deadline)");
    bytes32 public constant RESCUE_TYPEHASH =
        keccak256("Rescue(bytes32 paymentId,address token,address to,uint256 amount,uint256 deadline)");

    /// @notice The PaymentFactory that deployed the implementation (and so every clone).
    address public immutable factory;
    StablepayRegistry public immutable registry;
    address private immutable _implementation;

    Payment private _payment;
    /// @notice EIP-712 digests already used (replay protection for capture, refund, rescue).
    mapping(bytes32 digest => bool) public signatureUsed;

    event PaymentSettled(
        bytes32 indexed paymentId, address indexed token, address indexed settlement, uint256 amount, uint256 received
    );
    event EscrowFunded(bytes32 indexed paymentId, address indexed token, address indexed payer, uint256 amount);
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
    event PaymentRescued(
        bytes32 indexed paymentId, address indexed token, address indexed to, uint256 amount, uint256 received
    );
    event PaymentRecovered(
        bytes32 indexed paymentId, address indexed token, address indexed payer, uint256 amount, uint256 received
    );

    error NotFactory(address caller);
    error NotOperator(address caller);
    error NotADeposit();
    error AlreadyInitialized();
    error ZeroAmount();
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

    constructor(StablepayRegistry registry_) {
        factory = msg.sender;
        registry = registry_;
        _implementation = address(this);
        // The implementation itself can never be initialised.
        _payment.initialized = true;
        _payment.method = Method.NONE;
    }

    /// @notice Called by the factory in the deploying transaction. Records the payment and settles it.
    /// @return received what the settlement address received (DIRECT; fee-on-transfer aware), else 0.
    function initialize(
        bytes32 merchantId,
        bytes32 paymentId,
        Method method,
        address token,
        address payer,
        address settlement,
        uint256 amount
    ) external nonReentrant returns (uint256 received) {
        if (msg.sender != factory) revert NotFactory(msg.sender);
        Payment storage p = _payment;
        if (p.initialized) revert AlreadyInitialized();
        p.merchantId = merchantId;
        p.paymentId = paymentId;
        p.token = token;
        p.method = method;
        p.initialized = true;
        p.payer = payer;
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
            emit EscrowFunded(paymentId, token, payer, amount);
        }
    }

    /// @notice Merchant-signed (Capture): moves `amount` of the escrow to the settlement address bound at
    /// deployment. Anyone may submit the signature. Partial captures are allowed.
    function capture(address token, uint256 amount, uint256 deadline, bytes calldata signature)
        external
        nonReentrant
        returns (uint256 received)
    {
        Payment storage p = _payment;
        _checkEscrowMove(p, token, amount);
        _useMerchantSignature(
            p.merchantId,
            keccak256(abi.encode(CAPTURE_TYPEHASH, p.paymentId, token, amount, deadline)),
            deadline,
            signature
        );
        uint256 remaining = p.escrowed - amount;
        p.escrowed = remaining;
        address settlement = p.settlement;
        received = _push(token, settlement, amount);
        emit PaymentCaptured(p.paymentId, token, settlement, amount, received, remaining);
    }

    /// @notice Merchant-signed (Refund): returns `amount` of the escrow to the payer recorded at deployment.
    function refund(address token, uint256 amount, uint256 deadline, bytes calldata signature)
        external
        nonReentrant
        returns (uint256 received)
    {
        Payment storage p = _payment;
        _checkEscrowMove(p, token, amount);
        _useMerchantSignature(
            p.merchantId,
            keccak256(abi.encode(REFUND_TYPEHASH, p.paymentId, token, amount, deadline)),
            deadline,
            signature
        );
        uint256 remaining = p.escrowed - amount;
        p.escrowed = remaining;
        address payer = p.payer;
        received = _push(token, payer, amount);
        emit PaymentRefunded(p.paymentId, token, payer, amount, received, remaining);
    }

    /// @notice Merchant-signed (Rescue): moves stranded funds to `to`. Never touches the escrow. token = address(0)
    /// means the native coin.
    function rescue(address token, address to, uint256 amount, uint256 deadline, bytes calldata signature)
        external
        nonReentrant
        returns (uint256 received)
    {
        _requireClone();
        Payment storage p = _payment;
        _requireNotFlagged();
        if (amount == 0) revert ZeroAmount();
        if (to == address(0) || to == address(this)) revert InvalidDestination(to);
        uint256 available = _available(p, token);
        if (amount > available) revert AmountExceedsAvailable(amount, available);
        _useMerchantSignature(
            p.merchantId,
            keccak256(abi.encode(RESCUE_TYPEHASH, p.paymentId, token, to, amount, deadline)),
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

    /// @notice Operator only: returns everything above the escrow, in the payment token, to the payer recorded at
    /// deployment (over-deposit, abandoned checkout, a straggler from the payer). The destination is derived.
    function recover() external nonReentrant returns (uint256 amount, uint256 received) {
        _requireClone();
        if (msg.sender != registry.operator()) revert NotOperator(msg.sender);
        Payment storage p = _payment;
        _requireNotFlagged();
        address token = p.token;
        amount = _available(p, token);
        if (amount == 0) revert NothingToRecover();
        address payer = p.payer;
        received = _push(token, payer, amount);
        emit PaymentRecovered(p.paymentId, token, payer, amount, received);
    }

    /// @notice Everything recorded about this payment.
    function payment() external view returns (Payment memory) {
        return _payment;
    }

    /// @notice Whether the operator flagged this payment (no funds move, permanently).
    function flagged() public view returns (bool) {
        return IPaymentFlags(factory).isFlagged(address(this));
    }

    /// @notice Full EIP-712 digests, for signers and preflight checks to compare against.
    function hashCapture(address token, uint256 amount, uint256 deadline) external view returns (bytes32) {
        return _hashTypedData(keccak256(abi.encode(CAPTURE_TYPEHASH, _payment.paymentId, token, amount, deadline)));
    }

    function hashRefund(address token, uint256 amount, uint256 deadline) external view returns (bytes32) {
        return _hashTypedData(keccak256(abi.encode(REFUND_TYPEHASH, _payment.paymentId, token, amount, deadline)));
    }

    function hashRescue(address token, address to, uint256 amount, uint256 deadline) external view returns (bytes32) {
        return
            _hashTypedData(keccak256(abi.encode(RESCUE_TYPEHASH, _payment.paymentId, token, to, amount, deadline)));
    }

    function _checkEscrowMove(Payment storage p, address token, uint256 amount) private view {
        if (p.method != Method.TWO_STEP) revert NotEscrow();
        _requireNotFlagged();
        if (token != p.token) revert WrongToken(token, p.token);
        if (amount == 0) revert ZeroAmount();
        if (amount > p.escrowed) revert AmountExceedsEscrow(amount, p.escrowed);
    }

    function _available(Payment storage p, address token) private view returns (uint256) {
        if (token == address(0)) return address(this).balance;
        uint256 balance = token.balanceOf(address(this));
        if (token != p.token) return balance;
        uint256 escrowed = p.escrowed;
        return balance > escrowed ? balance - escrowed : 0;
    }

    function _requireClone() private view {
        if (address(this) == _implementation) revert NotADeposit();
    }

    function _requireNotFlagged() private view {
        if (flagged()) revert PaymentIsFlagged();
    }

    function _useMerchantSignature(bytes32 merchantId, bytes32 structHash, uint256 deadline, bytes calldata signature)
        private
    {
        _checkDeadline(deadline);
        bytes32 digest = _hashTypedData(structHash);
        if (signatureUsed[digest]) revert SignatureAlreadyUsed(digest);
        (address signer,) = registry.merchant(merchantId);
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
