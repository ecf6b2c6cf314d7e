// SPDX-License-Identifier: UNLICENSED
pragma solidity 0.8.37;

/// @notice The part of ERC-20 the Stablepay contracts call.
interface IERC20Minimal {
    function balanceOf(address account) external view returns (uint256);
    function allowance(address owner, address spender) external view returns (uint256);
    function transfer(address to, uint256 amount) external returns (bool);
    function transferFrom(address from, address to, uint256 amount) external returns (bool);
}
