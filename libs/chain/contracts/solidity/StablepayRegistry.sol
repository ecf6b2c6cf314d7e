// SPDX-License-Identifier: UNLICENSED
pragma solidity 0.8.37;

import {StablepayEip712} from "./common/StablepayEip712.sol";

/// @title StablepayRegistry
/// @notice Who may do what, per chain.
/// - admin: a cold key (two-step rotation). Sets the operator and the operator pauser, proposes merchant changes
///   (applied after MERCHANT_CHANGE_DELAY, cancellable by the merchant signer meanwhile), re-attests a disputed payer.
/// - operator: the service's hot relayer key. Registers a NEW merchant (first signer + settlement only), deploys
///   deposits and subscription managers, flags payments, recovers and rescues, signs subscribe authorizations. It
///   cannot change a registered merchant's signer or settlement address, and cannot move payer-owned funds anywhere
///   but to the payer.
/// - merchant signer: EIP-712 signatures for charge, cancel, capture, refund, rescue, payer disputes and consented
///   merchant changes; every signature names the merchant's current epoch, and the signer revokes every
///   outstanding signature at once by bumping it.
/// - settlement address: where DIRECT payments, captures and subscription charges are paid.
/// @dev Deployed through the deterministic deployment proxy, so its address depends only on its code and its
/// constructor arguments: the same on every chain, and nobody else can occupy it.
contract StablepayRegistry is StablepayEip712 {
    struct Merchant {
        address signer;
        address settlement;
        uint64 epoch;
    }

    struct PendingChange {
        address signer;
        address settlement;
        uint64 executableAt;
    }

    /// @notice How long an admin-proposed change of a registered merchant waits, so the merchant can cancel it.
    uint256 public constant MERCHANT_CHANGE_DELAY = 2 days;

    bytes32 public constant MERCHANT_CHANGE_TYPEHASH = keccak256(
        "MerchantChange(bytes32 merchantId,address signer,address settlement,uint256 epoch,uint256 deadline)"
    );
    bytes32 public constant REVOKE_AUTHORIZATIONS_TYPEHASH =
        keccak256("RevokeAuthorizations(bytes32 merchantId,uint256 epoch,uint256 deadline)");

    /// @notice The cold key; changes by two-step transfer.
    address public admin;
    address public pendingAdmin;
    /// @notice The service's hot relayer key (set by the admin).
    address public operator;
    /// @notice The operator's own pauser for subscription managers (must differ from every merchant pauser).
    address public operatorPauser;

    mapping(bytes32 merchantId => Merchant) private _merchants;
    mapping(bytes32 merchantId => PendingChange) private _pending;

    event AdminTransferStarted(address indexed currentAdmin, address indexed pendingAdmin);
    event AdminTransferred(address indexed previousAdmin, address indexed newAdmin);
    event OperatorSet(address indexed previousOperator, address indexed newOperator);
    event OperatorPauserSet(address indexed previousPauser, address indexed newPauser);
    event MerchantSignerSet(bytes32 indexed merchantId, address indexed previousSigner, address indexed newSigner);
    event SettlementAddressSet(
        bytes32 indexed merchantId, address indexed previousSettlement, address indexed newSettlement
    );
    event MerchantChangeProposed(
        bytes32 indexed merchantId, address indexed signer, address indexed settlement, uint256 executableAt
    );
    event MerchantChangeCancelled(bytes32 indexed merchantId, address indexed by);
    event AuthorizationsRevoked(bytes32 indexed merchantId, uint256 newEpoch);

    error NotAdmin(address caller);
    error NotOperator(address caller);
    error NotPendingAdmin(address caller);
    error ZeroAddress();
    error MerchantAlreadyRegistered(bytes32 merchantId);
    error MerchantNotRegistered(bytes32 merchantId);
    error NoPendingChange(bytes32 merchantId);
    error ChangeNotReady(uint256 executableAt, uint256 timestamp);
    error NotMerchantSigner(address caller);

    modifier onlyAdmin() {
        if (msg.sender != admin) revert NotAdmin(msg.sender);
        _;
    }

    constructor(address initialAdmin, address initialOperator, address initialOperatorPauser) {
        if (initialAdmin == address(0) || initialOperator == address(0) || initialOperatorPauser == address(0)) {
            revert ZeroAddress();
        }
        admin = initialAdmin;
        operator = initialOperator;
        operatorPauser = initialOperatorPauser;
        emit AdminTransferred(address(0), initialAdmin);
        emit OperatorSet(address(0), initialOperator);
        emit OperatorPauserSet(address(0), initialOperatorPauser);
    }

    // ---------------------------------------------------------------- views

    /// @notice The merchant's signer and settlement address (zero when not configured on this chain).
    function merchant(bytes32 merchantId) external view returns (address signer, address settlement) {
        Merchant storage m = _merchants[merchantId];
        return (m.signer, m.settlement);
    }

    /// @notice What a merchant signature is checked against: the signer and the epoch it must name.
    function merchantAuth(bytes32 merchantId) external view returns (address signer, uint256 epoch) {
        Merchant storage m = _merchants[merchantId];
        return (m.signer, m.epoch);
    }

    function merchantEpoch(bytes32 merchantId) external view returns (uint256) {
        return _merchants[merchantId].epoch;
    }

    function pendingMerchantChange(bytes32 merchantId)
        external
        view
        returns (address signer, address settlement, uint256 executableAt)
    {
        PendingChange storage c = _pending[merchantId];
        return (c.signer, c.settlement, c.executableAt);
    }

    function hashMerchantChange(bytes32 merchantId, address signer, address settlement, uint256 epoch, uint256 deadline)
        external
        view
        returns (bytes32)
    {
        return _hashTypedData(
            keccak256(abi.encode(MERCHANT_CHANGE_TYPEHASH, merchantId, signer, settlement, epoch, deadline))
        );
    }

    function hashRevokeAuthorizations(bytes32 merchantId, uint256 epoch, uint256 deadline)
        external
        view
        returns (bytes32)
    {
        return _hashTypedData(keccak256(abi.encode(REVOKE_AUTHORIZATIONS_TYPEHASH, merchantId, epoch, deadline)));
    }

    // ---------------------------------------------------------------- merchants

    /// @notice Operator or admin: registers a merchant that has no signer on this chain yet. Nothing is at stake
    /// before the first registration, so it applies at once; every later change goes through the paths below.
    function registerMerchant(bytes32 merchantId, address signer, address settlement) external {
        if (msg.sender != operator && msg.sender != admin) revert NotOperator(msg.sender);
        if (signer == address(0) || settlement == address(0)) revert ZeroAddress();
        if (_merchants[merchantId].signer != address(0)) revert MerchantAlreadyRegistered(merchantId);
        _apply(merchantId, signer, settlement);
    }

    /// @notice Anyone, with the CURRENT merchant signer's MerchantChange signature: rotates the signer and/or the
    /// settlement address at once (the merchant consents). Also bumps the epoch: the old signer's outstanding
    /// signatures die with it.
    function changeMerchant(
        bytes32 merchantId,
        address signer,
        address settlement,
        uint256 deadline,
        bytes calldata signature
    ) external {
        Merchant storage m = _merchants[merchantId];
        if (m.signer == address(0)) revert MerchantNotRegistered(merchantId);
        if (signer == address(0) || settlement == address(0)) revert ZeroAddress();
        _checkDeadline(deadline);
        _requireSigner(
            _hashTypedData(
                keccak256(abi.encode(MERCHANT_CHANGE_TYPEHASH, merchantId, signer, settlement, m.epoch, deadline))
            ),
            signature,
            m.signer
        );
        _apply(merchantId, signer, settlement);
        _bumpEpoch(merchantId, m);
        delete _pending[merchantId];
    }

    /// @notice Admin only, for a merchant that lost its signer key: proposes a change that anyone can execute after
    /// MERCHANT_CHANGE_DELAY. The merchant signer (or the admin) can cancel it meanwhile. A new proposal replaces
    /// the pending one and restarts the delay.
    function proposeMerchantChange(bytes32 merchantId, address signer, address settlement) external onlyAdmin {
        if (_merchants[merchantId].signer == address(0)) revert MerchantNotRegistered(merchantId);
        if (signer == address(0) || settlement == address(0)) revert ZeroAddress();
        uint64 executableAt = uint64(block.timestamp + MERCHANT_CHANGE_DELAY);
        _pending[merchantId] = PendingChange(signer, settlement, executableAt);
        emit MerchantChangeProposed(merchantId, signer, settlement, executableAt);
    }

    function executeMerchantChange(bytes32 merchantId) external {
        PendingChange memory c = _pending[merchantId];
        if (c.executableAt == 0) revert NoPendingChange(merchantId);
        if (block.timestamp < c.executableAt) revert ChangeNotReady(c.executableAt, block.timestamp);
        delete _pending[merchantId];
        _apply(merchantId, c.signer, c.settlement);
        _bumpEpoch(merchantId, _merchants[merchantId]);
    }

    /// @notice The merchant signer (from its own key) or the admin cancels a pending change.
    function cancelMerchantChange(bytes32 merchantId) external {
        if (msg.sender != admin && msg.sender != _merchants[merchantId].signer) revert NotMerchantSigner(msg.sender);
        if (_pending[merchantId].executableAt == 0) revert NoPendingChange(merchantId);
        delete _pending[merchantId];
        emit MerchantChangeCancelled(merchantId, msg.sender);
    }

    /// @notice The merchant signer, from its own key: every outstanding merchant signature (charge, cancel,
    /// capture, refund, rescue, dispute, change) stops working.
    function revokeAuthorizations(bytes32 merchantId) external {
        Merchant storage m = _merchants[merchantId];
        if (m.signer == address(0) || msg.sender != m.signer) revert NotMerchantSigner(msg.sender);
        _bumpEpoch(merchantId, m);
    }

    /// @notice The same by signature (a signer key that never holds gas), submitted by anyone.
    function revokeAuthorizationsBySig(bytes32 merchantId, uint256 deadline, bytes calldata signature) external {
        Merchant storage m = _merchants[merchantId];
        _checkDeadline(deadline);
        _requireSigner(
            _hashTypedData(keccak256(abi.encode(REVOKE_AUTHORIZATIONS_TYPEHASH, merchantId, m.epoch, deadline))),
            signature,
            m.signer
        );
        _bumpEpoch(merchantId, m);
    }

    // ---------------------------------------------------------------- roles

    function setOperator(address newOperator) external onlyAdmin {
        if (newOperator == address(0)) revert ZeroAddress();
        emit OperatorSet(operator, newOperator);
        operator = newOperator;
    }

    function setOperatorPauser(address newPauser) external onlyAdmin {
        if (newPauser == address(0)) revert ZeroAddress();
        emit OperatorPauserSet(operatorPauser, newPauser);
        operatorPauser = newPauser;
    }

    /// @notice Step one of an admin rotation; the new key must call acceptAdmin. Zero cancels a proposal.
    function transferAdmin(address newAdmin) external onlyAdmin {
        pendingAdmin = newAdmin;
        emit AdminTransferStarted(admin, newAdmin);
    }

    function acceptAdmin() external {
        if (msg.sender != pendingAdmin || msg.sender == address(0)) revert NotPendingAdmin(msg.sender);
        emit AdminTransferred(admin, msg.sender);
        admin = msg.sender;
        pendingAdmin = address(0);
    }

    // ---------------------------------------------------------------- internals

    function _apply(bytes32 merchantId, address signer, address settlement) private {
        Merchant storage m = _merchants[merchantId];
        address previousSigner = m.signer;
        address previousSettlement = m.settlement;
        if (previousSigner != signer) {
            m.signer = signer;
            emit MerchantSignerSet(merchantId, previousSigner, signer);
        }
        if (previousSettlement != settlement) {
            m.settlement = settlement;
            emit SettlementAddressSet(merchantId, previousSettlement, settlement);
        }
    }

    function _bumpEpoch(bytes32 merchantId, Merchant storage m) private {
        uint64 next = m.epoch + 1;
        m.epoch = next;
        emit AuthorizationsRevoked(merchantId, next);
    }
}
