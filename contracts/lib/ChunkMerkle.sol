// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {Binary32} from "./Binary32.sol";

/// @title ChunkMerkle: the chunk commitment of protocol v2 and its openings
/// @notice Verifies that a 64-byte chunk of a committed binary32 vector is at a given index, and
/// reads values out of a chunk, exactly as `contracts/PROTOCOL.md` §2 defines the commitment.
/// The Python reference is `trainer/tenzro_trainer/commitment.py`; both are checked against
/// `tests/vectors/chunk_commitment_v1.json`.
///
/// Commitment (all integers big-endian; `||` concatenation; `fl` one binary32 operation of
/// `Binary32`, round to nearest even, every NaN result the canonical 0x7FC00000):
/// - a vector of n >= 1 binary32 values is cut into `m = ceil(n / 16)` chunks of 16 values,
///   each value its 4-byte bit pattern (64 bytes per chunk), the last chunk padded with +0;
/// - leaf:  `h = keccak256(0x00 || chunk)` (65 bytes), `s = fl(... fl(fl(+0 + fl(x_0 * x_0)) +
///   fl(x_1 * x_1)) ... + fl(x_15 * x_15))`;
/// - the leaves are padded with empty nodes `(0x00..00, +0)` to `2^d` leaves, `d = ceil(log2 m)`;
///   inner node: `h = keccak256(0x01 || h_l || s_l || h_r || s_r)` (73 bytes, each `s` 4 bytes),
///   `s = fl(s_l + s_r)`; one leaf is its own root;
/// - commitment `(rootH, rootS)`: `rootS` is the squared L2 norm in the tree's summation order.
///
/// n itself is not hashed: the caller supplies it from its own state (the fragment's size);
/// an opening also verifies against any other n with the same depth that still holds the chunk.
///
/// Gas (solc 0.8.28, optimizer 200 runs, cancun; `tests/forge/ChunkMerkle.t.sol::test_gas_*`,
/// one internal call, normal operands): `leaf` ~31.7k (16 `Binary32.mul` + 16 `Binary32.add`,
/// ~30k of it), `node` ~1.25k; `verify` ~56k at depth 16 (an opening of a 1M-value fragment:
/// 62,500 chunks) and ~47k at depth 10; through an external call with ABI decoding ~69k / ~58k.
library ChunkMerkle {
    // ---------------------------------------------------------------- constants

    /// @notice Values per chunk.
    uint256 internal constant CHUNK_VALUES = 16;
    /// @notice Bytes per chunk (16 big-endian binary32 bit patterns).
    uint256 internal constant CHUNK_BYTES = 64;

    // ---------------------------------------------------------------- errors

    /// @notice A chunk was not exactly 64 bytes long.
    /// @param length the length given.
    error ChunkMerkle__BadChunkLength(uint256 length);
    /// @notice A value index within a chunk was not in 0..15.
    /// @param j the index given.
    error ChunkMerkle__ValueIndexOutOfRange(uint256 j);
    /// @notice A chunk index was not below the number of chunks `ceil(n / 16)`.
    /// @param chunkIndex the index given.
    /// @param chunkCount the number of chunks of the vector, `ceil(n / 16)`.
    error ChunkMerkle__ChunkIndexOutOfRange(uint256 chunkIndex, uint256 chunkCount);

    // ---------------------------------------------------------------- tree shape

    /// @notice `m = ceil(n / 16)`: the number of chunks (leaves) of a vector of n values.
    /// @param n the vector's length (any uint256; 0 gives 0).
    function numChunks(uint256 n) internal pure returns (uint256) {
        return n / CHUNK_VALUES + (n % CHUNK_VALUES == 0 ? 0 : 1);
    }

    /// @notice `d = ceil(log2 m)` for m >= 1 leaves (0 for m <= 1): the length of every proof.
    /// @param m the number of leaves.
    function depth(uint256 m) internal pure returns (uint256 d) {
        if (m <= 1) return 0;
        unchecked {
            // m >= 2: m - 1 cannot wrap; d counts the bits of m - 1 (at most 256).
            for (uint256 x = m - 1; x != 0; x >>= 1) ++d;
        }
    }

    // ---------------------------------------------------------------- hashes

    /// @notice `(h, s)` of the leaf of one chunk.
    /// @param chunk64 the 64 chunk bytes: 16 big-endian binary32 bit patterns.
    /// @return h keccak256(0x00 || chunk64).
    /// @return s the canonical sum of squares of the 16 values (binary32 bit pattern).
    function leaf(bytes memory chunk64) internal pure returns (bytes32 h, uint32 s) {
        if (chunk64.length != CHUNK_BYTES) revert ChunkMerkle__BadChunkLength(chunk64.length);
        uint256 w0;
        uint256 w1;
        assembly ("memory-safe") {
            w0 := mload(add(chunk64, 0x20)) // values 0..7
            w1 := mload(add(chunk64, 0x40)) // values 8..15
            // 0x00 || chunk in the free memory after the free pointer (not allocated: scratch).
            let ptr := mload(0x40)
            mstore(ptr, 0)
            mstore(add(ptr, 1), w0)
            mstore(add(ptr, 33), w1)
            h := keccak256(ptr, 65)
        }
        s = _sumsq8(_sumsq8(0, w0), w1);
    }

    /// @notice `(h, s)` of the inner node over a left child `(hl, sl)` and a right child `(hr, sr)`.
    /// @param hl left child's hash.
    /// @param sl left child's sum (binary32 bit pattern).
    /// @param hr right child's hash.
    /// @param sr right child's sum (binary32 bit pattern).
    /// @return h keccak256(0x01 || hl || sl || hr || sr), each s as 4 bytes big-endian (73 bytes).
    /// @return s fl(sl + sr) (binary32 bit pattern).
    function node(bytes32 hl, uint32 sl, bytes32 hr, uint32 sr) internal pure returns (bytes32 h, uint32 s) {
        assembly ("memory-safe") {
            // Left to right, each mstore overwriting the zero tail of the one before; shl(224, .)
            // keeps only the low 32 bits of a uint32 (whatever its unused high bits hold).
            let ptr := mload(0x40)
            mstore(ptr, shl(248, 1))
            mstore(add(ptr, 1), hl)
            mstore(add(ptr, 33), shl(224, sl))
            mstore(add(ptr, 37), hr)
            mstore(add(ptr, 69), shl(224, sr))
            h := keccak256(ptr, 73)
        }
        s = Binary32.add(sl, sr);
    }

    // ---------------------------------------------------------------- openings

    /// @notice Whether `chunk64` is chunk `chunkIndex` of the committed vector of n values.
    /// @dev Returns false (never reverts) when n is 0, `chunkIndex >= ceil(n / 16)`, the chunk is
    /// not 64 bytes, or either sibling array's length is not `ceil(log2 ceil(n / 16))`; otherwise
    /// recomputes the leaf and every parent `(h, s)` (bit i of `chunkIndex` set: the node is a
    /// right child at level i) and compares with `(rootH, rootS)`. The padding of the last chunk
    /// is not checked (see `paddingIsZero`), so that a chunk with bad padding can be opened and
    /// shown to be bad.
    /// @param rootH the commitment's root hash.
    /// @param rootS the commitment's root sum (binary32 bit pattern).
    /// @param n the vector's length (the fragment size).
    /// @param chunkIndex the chunk opened, `coordinate / 16`.
    /// @param chunk64 the chunk's 64 bytes.
    /// @param siblingH the sibling hashes, from the leaf's sibling up to the root's child.
    /// @param siblingS the sibling sums (binary32 bit patterns), in the same order.
    function verify(
        bytes32 rootH,
        uint32 rootS,
        uint256 n,
        uint256 chunkIndex,
        bytes memory chunk64,
        bytes32[] memory siblingH,
        uint32[] memory siblingS
    ) internal pure returns (bool) {
        uint256 m = numChunks(n);
        if (chunkIndex >= m || chunk64.length != CHUNK_BYTES) return false;
        uint256 d = depth(m);
        if (siblingH.length != d || siblingS.length != d) return false;
        (bytes32 h, uint32 s) = leaf(chunk64);
        uint256 i = chunkIndex;
        for (uint256 k; k < d; ++k) {
            if (i & 1 == 0) (h, s) = node(h, s, siblingH[k], siblingS[k]);
            else (h, s) = node(siblingH[k], siblingS[k], h, s);
            i >>= 1;
        }
        return h == rootH && s == rootS;
    }

    /// @notice The bit pattern of value j of a chunk (coordinate `16 * chunkIndex + j`).
    /// @param chunk64 the chunk's 64 bytes.
    /// @param j the value's index in the chunk, 0..15.
    function valueAt(bytes memory chunk64, uint256 j) internal pure returns (uint32 v) {
        if (chunk64.length != CHUNK_BYTES) revert ChunkMerkle__BadChunkLength(chunk64.length);
        if (j >= CHUNK_VALUES) revert ChunkMerkle__ValueIndexOutOfRange(j);
        assembly ("memory-safe") {
            v := shr(224, mload(add(add(chunk64, 0x20), shl(2, j))))
        }
    }

    /// @notice Whether every value of chunk `chunkIndex` at a coordinate >= n is 0x00000000 (+0),
    /// as the encoding requires; true for every chunk but a partial last one.
    /// @param chunk64 the chunk's 64 bytes.
    /// @param n the vector's length.
    /// @param chunkIndex the chunk's index, below `ceil(n / 16)`.
    function paddingIsZero(bytes memory chunk64, uint256 n, uint256 chunkIndex) internal pure returns (bool) {
        if (chunk64.length != CHUNK_BYTES) revert ChunkMerkle__BadChunkLength(chunk64.length);
        uint256 m = numChunks(n);
        if (chunkIndex >= m) revert ChunkMerkle__ChunkIndexOutOfRange(chunkIndex, m);
        uint256 w0;
        uint256 w1;
        assembly ("memory-safe") {
            w0 := mload(add(chunk64, 0x20))
            w1 := mload(add(chunk64, 0x40))
        }
        unchecked {
            // chunkIndex < m = ceil(n / 16), so 16 * chunkIndex < n: no wrap; real is 1..16+.
            uint256 real = n - CHUNK_VALUES * chunkIndex;
            if (real >= CHUNK_VALUES) return true;
            // The chunk is a 512-bit big-endian word w0 || w1; padding is its low padBits bits.
            uint256 padBits = (CHUNK_VALUES - real) * 32; // 32..480
            if (padBits < 256) return w1 & ((1 << padBits) - 1) == 0;
            return w1 == 0 && w0 & ((1 << (padBits - 256)) - 1) == 0;
        }
    }

    // ---------------------------------------------------------------- internal

    /// @dev Continues the sum of squares `acc` over the 8 big-endian binary32 values of a word.
    function _sumsq8(uint32 acc, uint256 w) private pure returns (uint32 out) {
        out = acc;
        unchecked {
            // k = 224, 192, ..., 0 (value 0 of the word is its top 32 bits): k never goes below 0.
            for (uint256 k = 256; k != 0; ) {
                k -= 32;
                uint32 x = uint32(w >> k);
                out = Binary32.add(out, Binary32.mul(x, x));
            }
        }
    }
}
