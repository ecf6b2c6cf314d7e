// SPDX-License-Identifier: UNLICENSED
pragma solidity 0.8.37;

import {StablepayEip712} from "./common/StablepayEip712.sol";
import {ReentrancyGuard} from "./common/ReentrancyGuard.sol";
import {SafeTokenTransfer} from "./common/SafeTokenTransfer.sol";
import {IERC20Minimal} from "./common/IERC20Minimal.sol";
import {StablepayRegistry} from "./StablepayRegistry.sol";

/// @title SubscriptionManager
/// @notice One per merchant. Holds the merchant's subscriptions and pulls charges from subscriber wallets (which
/// approve this contract) to the merchant settlement address registered in the StablepayRegistry.
///
/// - subscribe: the subscriber's own transaction, authorised by an operator-signed SubscribeAuthorization (the
///   service signs the converted terms and the subscriber's wallet, so only that wallet can submit it); registers
///   the subscription and pays the first charge (nonce 0).
/// - charge: merchant-signed (Charge: subscriptionId, amount, nonce, quoteHash, epoch, deadline), submitted by
///   anyone (the service's relayer). Each nonce charges once: a replay reverts NonceAlreadyUsed, and
///   SubscriptionCharged carries the nonce, so a submitter whose transaction lost the race to another submitter of
///   the same signature can tell "my charge landed" from a failure.
/// - cancel: merchant-signed (CancelSubscription) or by the subscriber.
/// - updateCap, updateBudget: the subscriber only; a merchant key can never change either ceiling.
/// - migration: the subscriber proposes a new wallet, the new wallet accepts (proving control) in its own tx,
///   naming the cap and budget it agrees to; any change of terms voids a pending proposal.
/// - pause: the merchant pauser (immutable, bound into this contract's CREATE2 address) and the operator pauser
///   each hold their own pause flag; either flag blocks subscribe and charge.
///
/// Enforced on every charge: amount <= cap, and the sum inside the current window <= budget, with tumbling
/// windows anchored at the immutable start: window = (block.timestamp - startedAt) / periodDuration. Several
/// charges per window are allowed. Across one window boundary at most 2 x budget can be charged.
/// The SPEC's named errors (ChargeAmountExceedsCap, BudgetExceeded, InsufficientBalance, InsufficientAllowance,
/// SubscriptionNotActive) are all raised before any token moves, so a simulation reports them by name.
contract SubscriptionManager is StablepayEip712, ReentrancyGuard {
    using SafeTokenTransfer for address;

    enum Status {
        None,
        Active,
        Cancelled
    }

    enum Canceller {
        Merchant,
        Subscriber
    }

    enum PauserRole {
        Merchant,
        Operator
    }

    struct Subscription {
        address subscriber;
        uint40 startedAt;
        uint32 periodDuration;
        Status status;
        address token;
        uint64 chargeNonce; // the next charge's nonce (0 was used by subscribe)
        uint32 windowIndex; // the window windowSpent belongs to
        uint256 cap;
        uint256 budget;
        uint256 windowSpent;
        address pendingSubscriber;
    }

    /// @dev Field order and types mirror SUBSCRIBE_AUTHORIZATION_TYPES in libs/chain/evm/src/eip712.ts.
    /// `subscriber` is the only wallet that may submit it (msg.sender), so nobody can front-run it from another wallet.
    struct SubscribeAuthorization {
        bytes32 subscriptionId;
        address subscriber;
        address token;
        uint256 cap;
        uint256 budget;
        uint256 periodDuration;
        uint256 firstChargeAmount;
        uint256 deadline;
    }

    uint256 public constant MIN_PERIOD_DURATION = 3600;

    bytes32 public constant CHARGE_TYPEHASH =
        keccak256(
            "Charge(bytes32 subscriptionId,uint256 amount,uint256 nonce,bytes32 quoteHash,uint256 epoch,uint256 deadline)"
        );
    bytes32 public constant CANCEL_SUBSCRIPTION_TYPEHASH =
        keccak256("CancelSubscription(bytes32 subscriptionId,uint256 nonce,uint256 epoch,uint256 deadline)");
    bytes32 public constant SUBSCRIBE_AUTHORIZATION_TYPEHASH = keccak256(
        "SubscribeAuthorization(bytes32 subscriptionId,address subscriber,address token,uint256 cap,uint256 budget,uint256 periodDuration,uint256 firstChargeAmount,uint256 deadline)"
    );

    StablepayRegistry public immutable registry;
    bytes32 public immutable merchantId;
    /// @notice The merchant's pauser, bound into this contract's address by the factory's CREATE2 salt.
    address public immutable merchantPauser;

    bool public pausedByMerchant;
    bool public pausedByOperator;

    mapping(bytes32 subscriptionId => Subscription) private _subscriptions;

    event SubscriptionCreated(
        bytes32 indexed subscriptionId,
        address indexed subscriber,
        address indexed token,
        uint256 cap,
        uint256 budget,
        uint256 periodDuration,
        uint256 startedAt
    );
    /// @param nonce the nonce this charge used; windowSpent is the window's total including this charge;
    /// received is what the payee's balance grew by (less than amount for fee-on-transfer tokens).
    event SubscriptionCharged(
        bytes32 indexed subscriptionId,
        address indexed subscriber,
        address indexed payee,
        address token,
        uint256 amount,
        uint256 received,
        uint256 nonce,
        uint256 windowIndex,
        uint256 windowSpent,
        bytes32 quoteHash,
        uint256 timestamp
    );
    event SubscriptionCancelled(
        bytes32 indexed subscriptionId,
        address indexed subscriber,
        Canceller indexed cancelledBy,
        address sender,
        uint256 nonce,
        uint256 timestamp
    );
    event CapUpdated(
        bytes32 indexed subscriptionId, address indexed subscriber, uint256 oldCap, uint256 newCap, uint256 timestamp
    );
    event BudgetUpdated(
        bytes32 indexed subscriptionId,
        address indexed subscriber,
        uint256 oldBudget,
        uint256 newBudget,
        uint256 windowIndex,
        uint256 windowSpent,
        uint256 timestamp
    );
    event MigrationProposed(
        bytes32 indexed subscriptionId, address indexed subscriber, address indexed proposedSubscriber
    );
    /// A change of cap or budget, or a cancel, voided the pending migration proposal.
    event MigrationVoided(
        bytes32 indexed subscriptionId, address indexed subscriber, address indexed proposedSubscriber
    );
    event SubscriptionMigrated(
        bytes32 indexed subscriptionId,
        address indexed oldSubscriber,
        address indexed newSubscriber,
        uint256 newSubscriberBalance,
        uint256 newSubscriberAllowance,
        uint256 timestamp
    );
    event Paused(address indexed account, PauserRole indexed role);
    event Unpaused(address indexed account, PauserRole indexed role);

    error ChargeAmountExceedsCap(uint256 amount, uint256 cap);
    error BudgetExceeded(uint256 amount, uint256 windowSpent, uint256 budget);
    error InsufficientBalance(uint256 balance, uint256 amount);
    error InsufficientAllowance(uint256 allowance, uint256 amount);
    error SubscriptionNotActive(bytes32 subscriptionId);
    error SubscriptionAlreadyExists(bytes32 subscriptionId);
    error SubscriberMismatch(address expected, address actual);
    error UnknownSubscription(bytes32 subscriptionId);
    error ManagerPaused();
    error InvalidNonce(uint256 expected, uint256 provided);
    /// The charge with this nonce already happened (possibly submitted by someone else): see SubscriptionCharged.
    error NonceAlreadyUsed(bytes32 subscriptionId, uint256 nonce);
    error MigrationTermsChanged(uint256 expectedCap, uint256 cap, uint256 expectedBudget, uint256 budget);
    error ZeroAmount();
    error ZeroAddress();
    error CapExceedsBudget(uint256 cap, uint256 budget);
    error PeriodTooShort(uint256 periodDuration, uint256 minimum);
    error PeriodTooLong(uint256 periodDuration);
    error MerchantNotConfigured(bytes32 merchantId);
    error NotSubscriber(address caller);
    error NotPendingSubscriber(address caller);
    error InvalidMigrationTarget(address newSubscriber);
    error NotPauser(address caller);

    constructor(StablepayRegistry registry_, bytes32 merchantId_, address merchantPauser_) {
        if (merchantPauser_ == address(0)) revert ZeroAddress();
        registry = registry_;
        merchantId = merchantId_;
        merchantPauser = merchantPauser_;
    }

    modifier whenNotPaused() {
        if (pausedByMerchant || pausedByOperator) revert ManagerPaused();
        _;
    }

    // ---------------------------------------------------------------- subscriber + service

    /// @notice The subscriber's transaction: registers the subscription on the operator-signed terms and pays the
    /// first charge (nonce 0, window 0) from msg.sender to the merchant settlement address. msg.sender must be the
    /// `auth.subscriber` the operator signed (SubscriberMismatch otherwise), so a copy of a pending subscribe seen in
    /// the mempool cannot be front-run from another wallet to take the subscription id.
    function subscribe(SubscribeAuthorization calldata auth, bytes calldata operatorSignature)
        external
        nonReentrant
        whenNotPaused
        returns (uint256 received)
    {
        bytes32 id = auth.subscriptionId;
        Subscription storage s = _subscriptions[id];
        if (s.status != Status.None) revert SubscriptionAlreadyExists(id);
        if (auth.subscriber != msg.sender) revert SubscriberMismatch(auth.subscriber, msg.sender);
        _checkDeadline(auth.deadline);
        if (auth.periodDuration < MIN_PERIOD_DURATION) {
            revert PeriodTooShort(auth.periodDuration, MIN_PERIOD_DURATION);
        }
        if (auth.periodDuration > type(uint32).max) revert PeriodTooLong(auth.periodDuration);
        if (auth.token == address(0)) revert ZeroAddress();
        if (auth.firstChargeAmount == 0) revert ZeroAmount();
        if (auth.cap > auth.budget) revert CapExceedsBudget(auth.cap, auth.budget);
        if (auth.firstChargeAmount > auth.cap) revert ChargeAmountExceedsCap(auth.firstChargeAmount, auth.cap);
        _requireSigner(
            _hashTypedData(keccak256(abi.encode(SUBSCRIBE_AUTHORIZATION_TYPEHASH, auth))),
            operatorSignature,
            registry.operator()
        );
        (, address payee) = registry.merchant(merchantId);
        if (payee == address(0)) revert MerchantNotConfigured(merchantId);
        _requireFunds(auth.token, msg.sender, auth.firstChargeAmount);

        s.subscriber = msg.sender;
        s.startedAt = uint40(block.timestamp);
        s.periodDuration = uint32(auth.periodDuration);
        s.status = Status.Active;
        s.token = auth.token;
        s.chargeNonce = 1;
        s.windowIndex = 0;
        s.cap = auth.cap;
        s.budget = auth.budget;
        s.windowSpent = auth.firstChargeAmount;
        emit SubscriptionCreated(
            id, msg.sender, auth.token, auth.cap, auth.budget, auth.periodDuration, block.timestamp
        );

        received = _pull(auth.token, msg.sender, payee, auth.firstChargeAmount);
        emit SubscriptionCharged(
            id,
            msg.sender,
            payee,
            auth.token,
            auth.firstChargeAmount,
            received,
            0,
            0,
            auth.firstChargeAmount,
            bytes32(0),
            block.timestamp
        );
    }

    /// @notice Merchant-signed charge, submitted by anyone (the service's relayer). `nonce` must be the
    /// subscription's next nonce; `quoteHash` binds the quote the amount came from (zero when none) and is echoed
    /// in the event.
    function charge(
        bytes32 subscriptionId,
        uint256 amount,
        uint256 nonce,
        bytes32 quoteHash,
        uint256 deadline,
        bytes calldata signature
    ) external nonReentrant returns (uint256 received) {
        Subscription storage s = _subscriptions[subscriptionId];
        // First, so a submitter that lost the race to another submitter of the same signature learns it at once.
        if (s.status != Status.None && nonce < s.chargeNonce) revert NonceAlreadyUsed(subscriptionId, nonce);
        if (pausedByMerchant || pausedByOperator) revert ManagerPaused();
        if (s.status != Status.Active) revert SubscriptionNotActive(subscriptionId);
        _checkDeadline(deadline);
        if (nonce != s.chargeNonce) revert InvalidNonce(s.chargeNonce, nonce);
        (address signer, uint256 epoch) = registry.merchantAuth(merchantId);
        _requireSigner(
            _hashTypedData(
                keccak256(abi.encode(CHARGE_TYPEHASH, subscriptionId, amount, nonce, quoteHash, epoch, deadline))
            ),
            signature,
            signer
        );
        if (amount == 0) revert ZeroAmount();
        uint256 cap = s.cap;
        if (amount > cap) revert ChargeAmountExceedsCap(amount, cap);
        uint32 window = _windowAt(s, block.timestamp);
        uint256 spent = window == s.windowIndex ? s.windowSpent : 0;
        uint256 budget = s.budget;
        if (spent > budget || amount > budget - spent) revert BudgetExceeded(amount, spent, budget);
        (, address payee) = registry.merchant(merchantId);
        if (payee == address(0)) revert MerchantNotConfigured(merchantId);
        address subscriber = s.subscriber;
        address token = s.token;
        _requireFunds(token, subscriber, amount);

        spent += amount;
        s.chargeNonce = uint64(nonce + 1);
        s.windowIndex = window;
        s.windowSpent = spent;
        received = _pull(token, subscriber, payee, amount);
        emit SubscriptionCharged(
            subscriptionId, subscriber, payee, token, amount, received, nonce, window, spent, quoteHash, block.timestamp
        );
    }

    /// @notice Merchant-signed cancel (CancelSubscription), submitted by anyone. `nonce` is the subscription's
    /// current (next) charge nonce, so a cancel signature is void once another charge went through.
    function merchantCancel(bytes32 subscriptionId, uint256 nonce, uint256 deadline, bytes calldata signature)
        external
        nonReentrant
    {
        Subscription storage s = _subscriptions[subscriptionId];
        if (s.status != Status.Active) revert SubscriptionNotActive(subscriptionId);
        _checkDeadline(deadline);
        if (nonce != s.chargeNonce) revert InvalidNonce(s.chargeNonce, nonce);
        (address signer, uint256 epoch) = registry.merchantAuth(merchantId);
        _requireSigner(
            _hashTypedData(
                keccak256(abi.encode(CANCEL_SUBSCRIPTION_TYPEHASH, subscriptionId, nonce, epoch, deadline))
            ),
            signature,
            signer
        );
        _cancel(subscriptionId, s, Canceller.Merchant);
    }

    /// @notice The subscriber cancels from their own wallet.
    function subscriberCancel(bytes32 subscriptionId) external nonReentrant {
        Subscription storage s = _activeOf(subscriptionId);
        if (msg.sender != s.subscriber) revert NotSubscriber(msg.sender);
        _cancel(subscriptionId, s, Canceller.Subscriber);
    }

    /// @notice Subscriber only: set the per-charge maximum (raise or lower).
    function updateCap(bytes32 subscriptionId, uint256 newCap) external nonReentrant {
        Subscription storage s = _activeOf(subscriptionId);
        if (msg.sender != s.subscriber) revert NotSubscriber(msg.sender);
        uint256 oldCap = s.cap;
        s.cap = newCap;
        _voidMigration(subscriptionId, s);
        emit CapUpdated(subscriptionId, msg.sender, oldCap, newCap, block.timestamp);
    }

    /// @notice Subscriber only: set the per-window ceiling (raise or lower). Applies to the current window at once.
    function updateBudget(bytes32 subscriptionId, uint256 newBudget) external nonReentrant {
        Subscription storage s = _activeOf(subscriptionId);
        if (msg.sender != s.subscriber) revert NotSubscriber(msg.sender);
        uint256 oldBudget = s.budget;
        s.budget = newBudget;
        _voidMigration(subscriptionId, s);
        uint32 window = _windowAt(s, block.timestamp);
        uint256 spent = window == s.windowIndex ? s.windowSpent : 0;
        emit BudgetUpdated(subscriptionId, msg.sender, oldBudget, newBudget, window, spent, block.timestamp);
    }

    /// @notice Subscriber only, step one of a wallet migration: name the new wallet (zero withdraws a proposal).
    function proposeMigration(bytes32 subscriptionId, address newSubscriber) external nonReentrant {
        Subscription storage s = _activeOf(subscriptionId);
        if (msg.sender != s.subscriber) revert NotSubscriber(msg.sender);
        if (newSubscriber == msg.sender) revert InvalidMigrationTarget(newSubscriber);
        s.pendingSubscriber = newSubscriber;
        emit MigrationProposed(subscriptionId, msg.sender, newSubscriber);
    }

    /// @notice Step two: the proposed wallet accepts from its own key (proving control), naming the cap and budget
    /// it saw: if they differ now, nothing changes (MigrationTermsChanged). Cap, budget, window, nonce and start
    /// are kept; later charges pull from the new wallet.
    function acceptMigration(bytes32 subscriptionId, uint256 expectedCap, uint256 expectedBudget)
        external
        nonReentrant
    {
        Subscription storage s = _activeOf(subscriptionId);
        if (msg.sender != s.pendingSubscriber || msg.sender == address(0)) revert NotPendingSubscriber(msg.sender);
        if (s.cap != expectedCap || s.budget != expectedBudget) {
            revert MigrationTermsChanged(expectedCap, s.cap, expectedBudget, s.budget);
        }
        address oldSubscriber = s.subscriber;
        s.subscriber = msg.sender;
        s.pendingSubscriber = address(0);
        address token = s.token;
        emit SubscriptionMigrated(
            subscriptionId,
            oldSubscriber,
            msg.sender,
            IERC20Minimal(token).balanceOf(msg.sender),
            IERC20Minimal(token).allowance(msg.sender, address(this)),
            block.timestamp
        );
    }

    // ---------------------------------------------------------------- pause authority

    /// @notice The merchant pauser or the operator pauser sets its own pause flag.
    function pause() external {
        _setPaused(true);
    }

    /// @notice Clears the caller's own pause flag; the other role's flag stays.
    function unpause() external {
        _setPaused(false);
    }

    function paused() external view returns (bool) {
        return pausedByMerchant || pausedByOperator;
    }

    // ---------------------------------------------------------------- views

    function getSubscription(bytes32 subscriptionId) external view returns (Subscription memory) {
        return _subscriptions[subscriptionId];
    }

    /// @notice The budget window at the current block time: its index, bounds [start, end), spend and remainder.
    function budgetState(bytes32 subscriptionId)
        external
        view
        returns (uint256 windowIndex, uint256 windowStart, uint256 windowEnd, uint256 spent, uint256 remaining)
    {
        Subscription storage s = _subscriptions[subscriptionId];
        if (s.status == Status.None) revert UnknownSubscription(subscriptionId);
        uint32 window = _windowAt(s, block.timestamp);
        windowIndex = window;
        windowStart = uint256(s.startedAt) + uint256(window) * s.periodDuration;
        windowEnd = windowStart + s.periodDuration;
        spent = window == s.windowIndex ? s.windowSpent : 0;
        remaining = spent >= s.budget ? 0 : s.budget - spent;
    }

    /// @notice The nonce the next charge must carry (0 before subscribe, which uses 0).
    function nextChargeNonce(bytes32 subscriptionId) external view returns (uint256) {
        return _subscriptions[subscriptionId].chargeNonce;
    }

    /// @notice Whether the charge with `nonce` happened (its SubscriptionCharged event carries the nonce).
    function chargeNonceUsed(bytes32 subscriptionId, uint256 nonce) external view returns (bool) {
        Subscription storage s = _subscriptions[subscriptionId];
        return s.status != Status.None && nonce < s.chargeNonce;
    }

    /// @notice Full EIP-712 digests, for signers and preflight checks to compare against.
    function hashCharge(
        bytes32 subscriptionId,
        uint256 amount,
        uint256 nonce,
        bytes32 quoteHash,
        uint256 epoch,
        uint256 deadline
    ) external view returns (bytes32) {
        return _hashTypedData(
            keccak256(abi.encode(CHARGE_TYPEHASH, subscriptionId, amount, nonce, quoteHash, epoch, deadline))
        );
    }

    function hashCancelSubscription(bytes32 subscriptionId, uint256 nonce, uint256 epoch, uint256 deadline)
        external
        view
        returns (bytes32)
    {
        return _hashTypedData(
            keccak256(abi.encode(CANCEL_SUBSCRIPTION_TYPEHASH, subscriptionId, nonce, epoch, deadline))
        );
    }

    function hashSubscribeAuthorization(SubscribeAuthorization calldata auth) external view returns (bytes32) {
        return _hashTypedData(keccak256(abi.encode(SUBSCRIBE_AUTHORIZATION_TYPEHASH, auth)));
    }

    // ---------------------------------------------------------------- internals

    function _activeOf(bytes32 subscriptionId) private view returns (Subscription storage s) {
        s = _subscriptions[subscriptionId];
        if (s.status != Status.Active) revert SubscriptionNotActive(subscriptionId);
    }

    function _cancel(bytes32 subscriptionId, Subscription storage s, Canceller by) private {
        s.status = Status.Cancelled;
        // Said on chain, so an indexer following MigrationProposed does not keep a proposal a cancel ended.
        _voidMigration(subscriptionId, s);
        emit SubscriptionCancelled(subscriptionId, s.subscriber, by, msg.sender, s.chargeNonce, block.timestamp);
    }

    function _voidMigration(bytes32 subscriptionId, Subscription storage s) private {
        address pending = s.pendingSubscriber;
        if (pending == address(0)) return;
        s.pendingSubscriber = address(0);
        emit MigrationVoided(subscriptionId, s.subscriber, pending);
    }

    function _windowAt(Subscription storage s, uint256 timestamp) private view returns (uint32) {
        return uint32((timestamp - s.startedAt) / s.periodDuration);
    }

    function _requireFunds(address token, address owner, uint256 amount) private view {
        uint256 balance = IERC20Minimal(token).balanceOf(owner);
        if (balance < amount) revert InsufficientBalance(balance, amount);
        uint256 allowance = IERC20Minimal(token).allowance(owner, address(this));
        if (allowance < amount) revert InsufficientAllowance(allowance, amount);
    }

    /// @dev transferFrom, returning what `to` actually received (fee-on-transfer aware).
    function _pull(address token, address from, address to, uint256 amount) private returns (uint256 received) {
        uint256 before = token.balanceOf(to);
        token.safeTransferFrom(from, to, amount);
        uint256 afterwards = token.balanceOf(to);
        received = afterwards >= before ? afterwards - before : 0;
    }

    function _setPaused(bool value) private {
        bool merchantRole = msg.sender == merchantPauser;
        bool operatorRole = msg.sender == registry.operatorPauser();
        if (!merchantRole && !operatorRole) revert NotPauser(msg.sender);
        if (merchantRole) {
            pausedByMerchant = value;
            if (value) emit Paused(msg.sender, PauserRole.Merchant);
            else emit Unpaused(msg.sender, PauserRole.Merchant);
        }
        if (operatorRole) {
            pausedByOperator = value;
            if (value) emit Paused(msg.sender, PauserRole.Operator);
            else emit Unpaused(msg.sender, PauserRole.Operator);
        }
    }
}
