// SPDX-License-Identifier: UNLICENSED
pragma solidity 0.8.37;

/// @notice Non-reentrancy lock in transient storage (EIP-1153, cancun): no storage write, cleared at the end of
/// the transaction even if a frame forgets. In a clone it locks the clone's own context.
abstract contract ReentrancyGuard {
    error ReentrantCall();

    bool private transient _entered;

    modifier nonReentrant() {
        if (_entered) revert ReentrantCall();
        _entered = true;
        _;
        _entered = false;
    }
}
