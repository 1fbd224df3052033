// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {RunRoot} from "./lib/RunRoot.sol";

/// @title ReceiptVerifier: a mimic of the TRAINING_VERIFY precompile (0x...1008)
/// @notice Raw input: a serialized v1 receipt (`contracts/RECEIPT.md`) followed by the
/// claimed 32-byte run root. Raw output: exactly one byte, 0x01 when the input is well
/// formed (version 1, R >= 1, length exactly 189 + 32 R + 32) and the recomputed run root
/// equals the claimed one, 0x00 otherwise.
/// @dev No selector, no ABI: everything goes through `fallback`. It returns 0x00 for every
/// malformed calldata instead of reverting. It holds no storage, no immutables and has no
/// constructor logic, so its runtime code can be copied to
/// 0x0000000000000000000000000000000000001008 with `anvil_setCode` (devnets) or deployed
/// normally elsewhere. Two things still end a call without output, as for any contract:
/// running out of gas (cost is linear in R, see RECEIPT.md) and sending ETH with the call
/// (the fallback is non-payable so no ETH can be locked here).
contract ReceiptVerifier {
    /// @notice Verifies `receipt || claimedRoot` given as raw calldata; returns one byte.
    fallback() external {
        bool ok = _verify(msg.data);
        assembly ("memory-safe") {
            mstore8(0, ok)
            return(0, 1)
        }
    }

    /// @dev Well-formedness is checked here, before RunRoot.runRoot, so that the library's
    /// revert on a malformed receipt can never be reached from the fallback.
    function _verify(bytes calldata input) private pure returns (bool) {
        uint256 len = input.length;
        // At least the header, one round digest and the claimed root.
        if (len < RunRoot.HEADER_LENGTH + 64) return false;
        if (uint8(input[0]) != RunRoot.VERSION) return false;
        uint256 rounds = uint32(bytes4(input[181:185]));
        // rounds < 2**32, so 189 + 32 * rounds + 32 cannot overflow.
        if (rounds == 0 || len != RunRoot.HEADER_LENGTH + 32 * rounds + 32) return false;
        uint256 n = len - 32;
        bytes32 claimed = bytes32(input[n:len]);
        return RunRoot.runRoot(input[:n]) == claimed;
    }
}

/// @title TrainingVerify: how a contract asks the TRAINING_VERIFY precompile (or its mimic)
/// @notice `verify(receipt, root)` staticcalls 0x...1008 with `receipt || root` and is true
/// only when the call succeeds and returns exactly the single byte 0x01. An address without
/// code (empty return data), a revert, or any other return data count as "not valid".
library TrainingVerify {
    /// @notice Address of the TRAINING_VERIFY precompile.
    address internal constant PRECOMPILE = 0x0000000000000000000000000000000000001008;

    /// @notice Asks the precompile at 0x...1008 whether `root` is the run root of `receipt`.
    /// @param receipt serialized v1 receipt (189 + 32 R bytes), without the root.
    /// @param root the claimed run root.
    function verify(bytes memory receipt, bytes32 root) internal view returns (bool) {
        return verifyAt(PRECOMPILE, receipt, root);
    }

    /// @notice As `verify`, against a verifier at `verifier` (a normally deployed ReceiptVerifier).
    /// @dev At most one byte of return data is copied, so a hostile verifier cannot
    /// make the caller pay for a large return buffer.
    function verifyAt(address verifier, bytes memory receipt, bytes32 root) internal view returns (bool valid) {
        bytes memory input = abi.encodePacked(receipt, root);
        assembly ("memory-safe") {
            mstore(0x00, 0)
            let success := staticcall(gas(), verifier, add(input, 32), mload(input), 0x00, 1)
            valid := and(and(success, eq(returndatasize(), 1)), eq(byte(0, mload(0x00)), 1))
        }
    }
}
