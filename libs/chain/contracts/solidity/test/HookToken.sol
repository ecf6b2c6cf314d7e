// SPDX-License-Identifier: UNLICENSED
pragma solidity 0.8.37;

import {TestStablecoin} from "../TestStablecoin.sol";

/// @notice Test only: on its next transfer, calls `target` with `data` (a reentry attempt) and bubbles a revert.
contract HookToken is TestStablecoin {
    address public hookTarget;
    bytes public hookData;

    constructor() TestStablecoin("Hook Token", "HOOK", 6) {}

    function setHook(address target, bytes calldata data) external {
        hookTarget = target;
        hookData = data;
    }

    function _transfer(address from, address to, uint256 amount) internal override {
        address target = hookTarget;
        if (target != address(0)) {
            hookTarget = address(0);
            (bool ok, bytes memory ret) = target.call(hookData);
            if (!ok) {
                assembly ("memory-safe") {
                    revert(add(ret, 32), mload(ret))
                }
            }
        }
        super._transfer(from, to, amount);
    }
}
