// SPDX-License-Identifier: UNLICENSED
pragma solidity 0.8.37;

/// @notice EIP-712 domain {name: "Stablepay", version: "1", chainId, verifyingContract: this contract} and ECDSA
/// checks. The domain separator is computed on every use from block.chainid and address(this), so it is right
/// inside a clone (delegatecall) and after a chain split. Mirrors libs/chain/evm/src/eip712.ts.
abstract contract StablepayEip712 {
    bytes32 internal constant DOMAIN_TYPEHASH =
        keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)");
    bytes32 internal constant NAME_HASH = keccak256("Stablepay");
    bytes32 internal constant VERSION_HASH = keccak256("1");
    /// secp256k1n / 2: signatures with a larger s are the malleable twin and are refused.
    uint256 private constant HALF_CURVE_ORDER = 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0;

    /// The signature is not 65 bytes, is malleable, or does not recover to the required signer.
    error InvalidSignature();
    /// @notice The furthest a signed deadline may lie in the future: a leaked or forgotten signature dies within
    /// this horizon even if nobody revokes it.
    uint256 public constant MAX_SIGNATURE_HORIZON = 7 days;

    /// block.timestamp is past the signed deadline.
    error SignatureExpired(uint256 deadline, uint256 timestamp);
    /// The signed deadline lies beyond block.timestamp + MAX_SIGNATURE_HORIZON.
    error DeadlineTooFar(uint256 deadline, uint256 maxDeadline);

    /// @notice The EIP-712 domain separator of this contract on this chain.
    function domainSeparator() public view returns (bytes32) {
        return keccak256(abi.encode(DOMAIN_TYPEHASH, NAME_HASH, VERSION_HASH, block.chainid, address(this)));
    }

    /// @notice EIP-5267 description of the domain, for wallets and tooling.
    function eip712Domain()
        external
        view
        returns (
            bytes1 fields,
            string memory name,
            string memory version,
            uint256 chainId,
            address verifyingContract,
            bytes32 salt,
            uint256[] memory extensions
        )
    {
        return (hex"0f", "Stablepay", "1", block.chainid, address(this), bytes32(0), new uint256[](0));
    }

    function _hashTypedData(bytes32 structHash) internal view returns (bytes32) {
        return keccak256(abi.encodePacked(hex"1901", domainSeparator(), structHash));
    }

    function _checkDeadline(uint256 deadline) internal view {
        if (block.timestamp > deadline) revert SignatureExpired(deadline, block.timestamp);
        uint256 maxDeadline = block.timestamp + MAX_SIGNATURE_HORIZON;
        if (deadline > maxDeadline) revert DeadlineTooFar(deadline, maxDeadline);
    }

    /// @dev Reverts unless `signature` (65 bytes r || s || v) over `digest` recovers to `expected` (never zero).
    function _requireSigner(bytes32 digest, bytes calldata signature, address expected) internal pure {
        if (signature.length != 65 || expected == address(0)) revert InvalidSignature();
        bytes32 r;
        bytes32 s;
        uint8 v;
        assembly ("memory-safe") {
            r := calldataload(signature.offset)
            s := calldataload(add(signature.offset, 32))
            v := byte(0, calldataload(add(signature.offset, 64)))
        }
        if (uint256(s) > HALF_CURVE_ORDER || (v != 27 && v != 28)) revert InvalidSignature();
        address recovered = ecrecover(digest, v, r, s);
        if (recovered == address(0) || recovered != expected) revert InvalidSignature();
    }
}
