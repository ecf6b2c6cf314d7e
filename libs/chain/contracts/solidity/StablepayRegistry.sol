// SPDX-License-Identifier: UNLICENSED
pragma solidity 0.8.37;

/// @title StablepayRegistry
/// @notice Who may do what, per chain: the operator (the service's key: deploys deposits and subscription managers,
/// registers merchants, flags payments, recovers funds, signs subscribe authorizations), the operator pauser, and
/// per merchant the merchant signer (EIP-712 signatures for charge, cancel, capture, refund, rescue) and the
/// settlement address (where DIRECT payments, captures and subscription charges are paid).
/// @dev Deployed through the deterministic deployment proxy, so its address depends only on its code and its
/// constructor arguments: the same on every chain, and nobody else can occupy it.
contract StablepayRegistry {
    struct Merchant {
        address signer;
        address settlement;
    }

    /// @notice The service key; changes by two-step transfer.
    address public operator;
    /// @notice Proposed operator until it accepts.
    address public pendingOperator;
    /// @notice The operator's own pauser for subscription managers (must differ from every merchant pauser).
    address public operatorPauser;

    mapping(bytes32 merchantId => Merchant) private _merchants;

    event OperatorTransferStarted(address indexed currentOperator, address indexed pendingOperator);
    event OperatorTransferred(address indexed previousOperator, address indexed newOperator);
    event OperatorPauserSet(address indexed previousPauser, address indexed newPauser);
    event MerchantSignerSet(bytes32 indexed merchantId, address indexed previousSigner, address indexed newSigner);
    event SettlementAddressSet(
        bytes32 indexed merchantId, address indexed previousSettlement, address indexed newSettlement
    );

    error NotOperator(address caller);
    error NotPendingOperator(address caller);
    error ZeroAddress();

    modifier onlyOperator() {
        if (msg.sender != operator) revert NotOperator(msg.sender);
        _;
    }

    constructor(address initialOperator, address initialOperatorPauser) {
        if (initialOperator == address(0) || initialOperatorPauser == address(0)) revert ZeroAddress();
        operator = initialOperator;
        operatorPauser = initialOperatorPauser;
        emit OperatorTransferred(address(0), initialOperator);
        emit OperatorPauserSet(address(0), initialOperatorPauser);
    }

    /// @notice The merchant's signer and settlement address (zero when not configured on this chain).
    function merchant(bytes32 merchantId) external view returns (address signer, address settlement) {
        Merchant storage m = _merchants[merchantId];
        return (m.signer, m.settlement);
    }

    /// @notice Registers or rotates the merchant signer and the settlement address. A zero signer revokes every
    /// merchant signature; a zero settlement address stops new deposits and charges for the merchant.
    function setMerchant(bytes32 merchantId, address signer, address settlement) external onlyOperator {
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

    function setOperatorPauser(address newPauser) external onlyOperator {
        if (newPauser == address(0)) revert ZeroAddress();
        emit OperatorPauserSet(operatorPauser, newPauser);
        operatorPauser = newPauser;
    }

    /// @notice Step one of an operator rotation; the new key must call acceptOperator. Zero cancels a proposal.
    function transferOperator(address newOperator) external onlyOperator {
        pendingOperator = newOperator;
        emit OperatorTransferStarted(operator, newOperator);
    }

    function acceptOperator() external {
        if (msg.sender != pendingOperator || msg.sender == address(0)) revert NotPendingOperator(msg.sender);
        emit OperatorTransferred(operator, msg.sender);
        operator = msg.sender;
        pendingOperator = address(0);
    }
}
