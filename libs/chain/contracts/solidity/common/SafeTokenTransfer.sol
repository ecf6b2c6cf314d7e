// SPDX-License-Identifier: UNLICENSED
pragma solidity 0.8.37;

import {IERC20Minimal} from "./IERC20Minimal.sol";

/// @notice ERC-20 calls that accept tokens returning nothing (USDT-style) and bubble the token's own revert.
library SafeTokenTransfer {
    /// The token call failed without a reason, returned false, or the token has no code.
    error TokenTransferFailed(address token);

    function safeTransfer(address token, address to, uint256 amount) internal {
        _call(token, abi.encodeCall(IERC20Minimal.transfer, (to, amount)));
    }

    function safeTransferFrom(address token, address from, address to, uint256 amount) internal {
        _call(token, abi.encodeCall(IERC20Minimal.transferFrom, (from, to, amount)));
    }

    function balanceOf(address token, address account) internal view returns (uint256) {
        return IERC20Minimal(token).balanceOf(account);
    }

    function _call(address token, bytes memory data) private {
        (bool ok, bytes memory ret) = token.call(data);
        if (!ok) {
            if (ret.length > 0) {
                assembly ("memory-safe") {
                    revert(add(ret, 32), mload(ret))
                }
            }
            revert TokenTransferFailed(token);
        }
        if (ret.length == 0) {
            if (token.code.length == 0) revert TokenTransferFailed(token);
        } else if (ret.length < 32 || !abi.decode(ret, (bool))) {
            revert TokenTransferFailed(token);
        }
    }
}
