// SPDX-License-Identifier: UNLICENSED
pragma solidity 0.8.37;

import {StablepayRegistry} from "./StablepayRegistry.sol";
import {SubscriptionManager} from "./SubscriptionManager.sol";

/// @title SubscriptionManagerFactory
/// @notice Deploys one SubscriptionManager per merchant at
/// CREATE2(this factory, salt = keccak256(abi.encode(merchantId, merchantPauser)), creation code ++ abi.encode(registry,
/// merchantId, merchantPauser)). The merchant pauser is thus bound into the manager's address: anyone can recompute
/// it from (merchantId, merchantPauser) and the manager's immutable merchantPauser cannot change. Deployed through
/// the deterministic deployment proxy, so it has the same address on every chain, and so does each manager.
contract SubscriptionManagerFactory {
    StablepayRegistry public immutable registry;

    /// @notice The merchant's deployed manager on this chain (one per merchant).
    mapping(bytes32 merchantId => address) public managerOf;

    event SubscriptionManagerDeployed(
        bytes32 indexed merchantId, address indexed merchantPauser, address indexed manager
    );

    error NotOperator(address caller);
    error ZeroAddress();
    error PauserIsOperatorPauser(address pauser);
    error ManagerAlreadyDeployed(bytes32 merchantId, address manager);

    constructor(StablepayRegistry registry_) {
        registry = registry_;
    }

    function managerSalt(bytes32 merchantId, address merchantPauser) public pure returns (bytes32) {
        return keccak256(abi.encode(merchantId, merchantPauser));
    }

    /// @notice The manager address for (merchantId, merchantPauser), deployed or not.
    function managerAddress(bytes32 merchantId, address merchantPauser) public view returns (address) {
        bytes32 initCodeHash = keccak256(
            abi.encodePacked(type(SubscriptionManager).creationCode, abi.encode(registry, merchantId, merchantPauser))
        );
        bytes32 h =
            keccak256(abi.encodePacked(bytes1(0xff), address(this), managerSalt(merchantId, merchantPauser), initCodeHash));
        return address(uint160(uint256(h)));
    }

    /// @notice Operator only: deploys the merchant's manager with its declared pauser.
    function deployManager(bytes32 merchantId, address merchantPauser) external returns (address manager) {
        if (msg.sender != registry.operator()) revert NotOperator(msg.sender);
        if (merchantPauser == address(0)) revert ZeroAddress();
        if (merchantPauser == registry.operatorPauser()) revert PauserIsOperatorPauser(merchantPauser);
        address existing = managerOf[merchantId];
        if (existing != address(0)) revert ManagerAlreadyDeployed(merchantId, existing);
        manager = address(
            new SubscriptionManager{salt: managerSalt(merchantId, merchantPauser)}(registry, merchantId, merchantPauser)
        );
        managerOf[merchantId] = manager;
        emit SubscriptionManagerDeployed(merchantId, merchantPauser, manager);
    }
}
