// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

/// @notice The root-flow credits tree of tests (PROTOCOL.md §5): leaf keccak256(0x04 ‖ uint16 i
/// ‖ uint256 credits), a positional tree over nextPow2(n) positions (empty ones 0).
library CreditsTree {
    /// @notice Trainer i's credits leaf.
    function leaf(uint16 i, uint256 credits) internal pure returns (bytes32) {
        return keccak256(abi.encodePacked(bytes1(0x04), i, credits));
    }

    /// @notice The leaves of trainers 0, 1, .. with these credits.
    function leaves(uint256[] memory credits) internal pure returns (bytes32[] memory l) {
        l = new bytes32[](credits.length);
        for (uint256 i = 0; i < credits.length; ++i) {
            l[i] = leaf(uint16(i), credits[i]);
        }
    }

    /// @notice The root of the tree over `l`, and position `at`'s path (siblings bottom-up).
    function rootAndPath(bytes32[] memory l, uint256 at) internal pure returns (bytes32 root, bytes32[] memory path) {
        uint256 w = 1;
        uint256 d;
        while (w < l.length) (w, d) = (w << 1, d + 1);
        bytes32[] memory level = new bytes32[](w);
        for (uint256 i = 0; i < l.length; ++i) {
            level[i] = l[i];
        }
        path = new bytes32[](d);
        for (uint256 k = 0; k < d; ++k) {
            path[k] = level[at ^ 1];
            bytes32[] memory up = new bytes32[](level.length / 2);
            for (uint256 i = 0; i < up.length; ++i) {
                up[i] = keccak256(abi.encodePacked(level[2 * i], level[2 * i + 1]));
            }
            (level, at) = (up, at >> 1);
        }
        root = level[0];
    }
}
