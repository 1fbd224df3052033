// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {ChunkMerkle} from "../lib/ChunkMerkle.sol";

/// @title ChunkMerkleHarness
/// @notice Test harness (not deployed in production): exposes the internal functions of
/// `ChunkMerkle` (contracts/PROTOCOL.md §2) as external ones, for tests/forge/ChunkMerkle.t.sol
/// and for Python tests through ape. Sums are binary32 bit patterns (`uint32`), chunks 64 bytes.
contract ChunkMerkleHarness {
    /// @notice `ChunkMerkle.leaf`: keccak256(0x00 || chunk64) and the chunk's canonical sum of squares.
    function leaf(bytes memory chunk64) external pure returns (bytes32 h, uint32 s) {
        return ChunkMerkle.leaf(chunk64);
    }

    /// @notice `ChunkMerkle.node`: keccak256(0x01 || hl || sl || hr || sr) and fl(sl + sr).
    function node(bytes32 hl, uint32 sl, bytes32 hr, uint32 sr) external pure returns (bytes32 h, uint32 s) {
        return ChunkMerkle.node(hl, sl, hr, sr);
    }

    /// @notice `ChunkMerkle.verify`: whether `chunk64` is chunk `chunkIndex` of the committed vector.
    function verify(
        bytes32 rootH,
        uint32 rootS,
        uint256 n,
        uint256 chunkIndex,
        bytes memory chunk64,
        bytes32[] memory siblingH,
        uint32[] memory siblingS
    ) external pure returns (bool) {
        return ChunkMerkle.verify(rootH, rootS, n, chunkIndex, chunk64, siblingH, siblingS);
    }

    /// @notice `ChunkMerkle.valueAt`: the bit pattern of value j (0..15) of a chunk.
    function valueAt(bytes memory chunk64, uint256 j) external pure returns (uint32) {
        return ChunkMerkle.valueAt(chunk64, j);
    }

    /// @notice `ChunkMerkle.paddingIsZero`: whether the values at coordinates >= n are +0.
    function paddingIsZero(bytes memory chunk64, uint256 n, uint256 chunkIndex) external pure returns (bool) {
        return ChunkMerkle.paddingIsZero(chunk64, n, chunkIndex);
    }

    /// @notice `ChunkMerkle.numChunks`: ceil(n / 16).
    function numChunks(uint256 n) external pure returns (uint256) {
        return ChunkMerkle.numChunks(n);
    }

    /// @notice `ChunkMerkle.depth`: ceil(log2 m), the proof length for m leaves.
    function depth(uint256 m) external pure returns (uint256) {
        return ChunkMerkle.depth(m);
    }
}
