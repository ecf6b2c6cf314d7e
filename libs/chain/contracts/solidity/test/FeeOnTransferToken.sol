// SPDX-License-Identifier: UNLICENSED
pragma solidity 0.8.37;

import {TestStablecoin} from "../TestStablecoin.sol";

/// @notice Test only: burns 1% of every transfer (the recipient gets 99%).
contract FeeOnTransferToken is TestStablecoin {
    constructor() TestStablecoin("Fee Token", "FEE", 6) {}

    function _transfer(address from, address to, uint256 amount) internal override {
        uint256 fee = amount / 100;
        super._transfer(from, to, amount);
        balanceOf[to] -= fee;
        totalSupply -= fee;
        emit Transfer(to, address(0), fee);
    }
}
