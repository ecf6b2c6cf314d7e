// SPDX-License-Identifier: UNLICENSED
pragma solidity 0.8.37;

import {ReentrancyGuard} from "./common/ReentrancyGuard.sol";
import {StablepayRegistry} from "./StablepayRegistry.sol";
import {PaymentDeposit} from "./PaymentDeposit.sol";

/// @title PaymentFactory
/// @notice Deploys per-payment deposit contracts at CREATE2 addresses known before the customer pays.
/// address = CREATE2(this factory, salt = keccak256(abi.encode(merchantId, paymentId)), EIP-1167 clone init code of
/// the implementation). The init code is fixed (it names only the implementation, which this factory creates in its
/// constructor), so the address does not depend on token, payer or amount; and since the factory itself is
/// deployed through the deterministic deployment proxy, the factory, the implementation and every deposit address
/// are the same on every chain. Only this factory can deploy at a deposit address, and only for the operator.
contract PaymentFactory is ReentrancyGuard {
    StablepayRegistry public immutable registry;
    /// @notice The PaymentDeposit implementation every deposit clone delegates to.
    address public immutable depositImplementation;
    /// @notice keccak256 of the clone init code (the third CREATE2 input).
    bytes32 public immutable depositInitCodeHash;

    /// @notice Payments flagged by the operator (keyed by deposit address, settable before deployment).
    mapping(address deposit => bool) public isFlagged;

    event DepositDeployed(
        bytes32 indexed merchantId,
        bytes32 indexed paymentId,
        address indexed deposit,
        PaymentDeposit.Method method,
        address token,
        address payer,
        address settlement,
        uint256 amount,
        uint256 received,
        uint256 authorizationExpiry
    );
    event PaymentFlagged(bytes32 indexed merchantId, bytes32 indexed paymentId, address indexed deposit);

    error NotOperator(address caller);
    error ZeroAddress();
    error MerchantNotConfigured(bytes32 merchantId);
    error PaymentIsFlagged();
    error AlreadyFlagged();
    error DepositAlreadyDeployed(address deposit);

    constructor(StablepayRegistry registry_) {
        registry = registry_;
        address implementation = address(new PaymentDeposit(registry_));
        depositImplementation = implementation;
        depositInitCodeHash = keccak256(_cloneInitCode(implementation));
    }

    modifier onlyOperator() {
        if (msg.sender != registry.operator()) revert NotOperator(msg.sender);
        _;
    }

    function depositSalt(bytes32 merchantId, bytes32 paymentId) public pure returns (bytes32) {
        return keccak256(abi.encode(merchantId, paymentId));
    }

    /// @notice The deposit address of a payment, whether or not it is deployed.
    function depositAddress(bytes32 merchantId, bytes32 paymentId) public view returns (address) {
        bytes32 h = keccak256(
            abi.encodePacked(bytes1(0xff), address(this), depositSalt(merchantId, paymentId), depositInitCodeHash)
        );
        return address(uint160(uint256(h)));
    }

    /// @notice Operator only: deploys the payment's deposit contract and settles it per `method` in one
    /// transaction. `payer` is the attested sender of the observed funding transfer (refund, reclaim and recover
    /// destination; final after the deposit's challenge period unless the merchant disputes it); `amount` is the
    /// funding amount to forward (DIRECT) or hold (TWO_STEP), 0 for NONE; `authorizationExpiry` ends a TWO_STEP
    /// escrow's capture window (0 otherwise). Whatever exceeds `amount` stays recoverable to the payer.
    function deployDeposit(
        bytes32 merchantId,
        bytes32 paymentId,
        PaymentDeposit.Method method,
        address token,
        address payer,
        uint256 amount,
        uint256 authorizationExpiry
    ) external onlyOperator nonReentrant returns (address deposit) {
        if (token == address(0) || payer == address(0)) revert ZeroAddress();
        address predicted = depositAddress(merchantId, paymentId);
        if (isFlagged[predicted]) revert PaymentIsFlagged();
        if (predicted.code.length != 0) revert DepositAlreadyDeployed(predicted);
        (, address settlement) = registry.merchant(merchantId);
        if (settlement == address(0) && method != PaymentDeposit.Method.NONE) {
            revert MerchantNotConfigured(merchantId);
        }
        bytes memory initCode = _cloneInitCode(depositImplementation);
        bytes32 salt = depositSalt(merchantId, paymentId);
        assembly ("memory-safe") {
            deposit := create2(0, add(initCode, 32), mload(initCode), salt)
        }
        if (deposit == address(0)) revert DepositAlreadyDeployed(predicted);
        uint256 received = PaymentDeposit(deposit).initialize(
            merchantId, paymentId, method, token, payer, settlement, amount, authorizationExpiry
        );
        emit DepositDeployed(
            merchantId, paymentId, deposit, method, token, payer, settlement, amount, received, authorizationExpiry
        );
    }

    /// @notice Operator only, permanent: the payment's funds can no longer be captured, refunded, rescued or
    /// recovered, and its deposit contract can no longer be deployed.
    function flagPayment(bytes32 merchantId, bytes32 paymentId) external onlyOperator {
        address deposit = depositAddress(merchantId, paymentId);
        if (isFlagged[deposit]) revert AlreadyFlagged();
        isFlagged[deposit] = true;
        emit PaymentFlagged(merchantId, paymentId, deposit);
    }

    /// @dev EIP-1167 minimal proxy creation code for `implementation` (55 bytes).
    function _cloneInitCode(address implementation) private pure returns (bytes memory) {
        return abi.encodePacked(
            hex"3d602d80600a3d3981f3363d3d373d3d3d363d73", implementation, hex"5af43d82803e903d91602b57fd5bf3"
        );
    }
}
