// SPDX-License-Identifier: UNLICENSED
pragma solidity 0.8.37;

import {ReentrancyGuard} from "./common/ReentrancyGuard.sol";
import {StablepayRegistry} from "./StablepayRegistry.sol";
import {PayoutDeposit} from "./PayoutDeposit.sol";

/// @title PayoutDepositFactory
/// @notice One deposit address per payout customer, known before anything is deployed and the same on every chain:
/// address = CREATE2(this factory, salt = keccak256(abi.encode(merchantId, customerId, offRamp)), EIP-1167 clone
/// init code of the implementation this factory creates in its constructor). The factory itself goes through the
/// deterministic deployment proxy (init code = code + registry), so the factory, the implementation and every
/// customer's address are identical on every chain. The off-ramp is part of the salt: the clone at an address can
/// only ever be initialised with the off-ramp that address was computed for (a new off-ramp means new addresses;
/// the old ones still sweep to the old off-ramp).
contract PayoutDepositFactory is ReentrancyGuard {
    StablepayRegistry public immutable registry;
    /// @notice The PayoutDeposit implementation every clone delegates to.
    address public immutable depositImplementation;
    /// @notice keccak256 of the clone init code (the third CREATE2 input).
    bytes32 public immutable depositInitCodeHash;

    event PayoutDepositDeployed(
        bytes32 indexed merchantId, bytes32 indexed customerId, address indexed deposit, address offRamp
    );

    error NotOperator(address caller);
    error ZeroAddress();
    error DepositAlreadyDeployed(address deposit);

    constructor(StablepayRegistry registry_) {
        registry = registry_;
        address implementation = address(new PayoutDeposit(registry_));
        depositImplementation = implementation;
        depositInitCodeHash = keccak256(_cloneInitCode(implementation));
    }

    modifier onlyOperator() {
        if (msg.sender != registry.operator()) revert NotOperator(msg.sender);
        _;
    }

    function depositSalt(bytes32 merchantId, bytes32 customerId, address offRamp) public pure returns (bytes32) {
        return keccak256(abi.encode(merchantId, customerId, offRamp));
    }

    /// @notice The customer's deposit address, whether or not it is deployed.
    function depositAddress(bytes32 merchantId, bytes32 customerId, address offRamp) public view returns (address) {
        bytes32 h = keccak256(
            abi.encodePacked(
                bytes1(0xff), address(this), depositSalt(merchantId, customerId, offRamp), depositInitCodeHash
            )
        );
        return address(uint160(uint256(h)));
    }

    /// @notice Operator only: deploys the customer's deposit contract (moves nothing). `sweep` and `refund` deploy
    /// on their own.
    function deployDeposit(bytes32 merchantId, bytes32 customerId, address offRamp)
        external
        onlyOperator
        nonReentrant
        returns (address deposit)
    {
        deposit = depositAddress(merchantId, customerId, offRamp);
        if (deposit.code.length != 0) revert DepositAlreadyDeployed(deposit);
        _deploy(merchantId, customerId, offRamp, deposit);
    }

    /// @notice Operator only: deploys the deposit contract if it is not there yet, then sends exactly `amount` of
    /// `token` to the off-ramp bound into its address, once per `payoutId` (see PayoutDeposit.sweep), in one
    /// transaction, so a sweep the deposit would refuse is refused in simulation before anything is deployed.
    function sweep(
        bytes32 merchantId,
        bytes32 customerId,
        address offRamp,
        address token,
        uint256 amount,
        bytes32 payoutId
    ) external onlyOperator nonReentrant returns (address deposit, uint256 received) {
        deposit = depositAddress(merchantId, customerId, offRamp);
        if (deposit.code.length == 0) _deploy(merchantId, customerId, offRamp, deposit);
        received = PayoutDeposit(deposit).sweep(token, amount, payoutId);
    }

    /// @notice Operator only: deploys the deposit contract if it is not there yet, then refunds with the merchant's
    /// `PayoutRefund` signature for one payout (see PayoutDeposit.refund), in one transaction, so a refund the deposit would refuse
    /// is refused in simulation before anything is deployed.
    function refund(
        bytes32 merchantId,
        bytes32 customerId,
        address offRamp,
        address token,
        address to,
        uint256 amount,
        bytes32 payoutId,
        uint256 deadline,
        bytes calldata signature
    ) external onlyOperator nonReentrant returns (address deposit, uint256 received) {
        deposit = depositAddress(merchantId, customerId, offRamp);
        if (deposit.code.length == 0) _deploy(merchantId, customerId, offRamp, deposit);
        received = PayoutDeposit(deposit).refund(token, to, amount, payoutId, deadline, signature);
    }

    function _deploy(bytes32 merchantId, bytes32 customerId, address offRamp, address predicted) private {
        if (offRamp == address(0)) revert ZeroAddress();
        bytes memory initCode = _cloneInitCode(depositImplementation);
        bytes32 salt = depositSalt(merchantId, customerId, offRamp);
        address deposit;
        assembly ("memory-safe") {
            deposit := create2(0, add(initCode, 32), mload(initCode), salt)
        }
        if (deposit != predicted) revert DepositAlreadyDeployed(predicted);
        PayoutDeposit(deposit).initialize(merchantId, customerId, offRamp);
        emit PayoutDepositDeployed(merchantId, customerId, deposit, offRamp);
    }

    /// @dev EIP-1167 minimal proxy creation code for `implementation` (55 bytes).
    function _cloneInitCode(address implementation) private pure returns (bytes memory) {
        return abi.encodePacked(
            hex"3d602d80600a3d3981f3363d3d373d3d3d363d73", implementation, hex"5af43d82803e903d91602b57fd5bf3"
        );
    }
}
