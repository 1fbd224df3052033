// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {Binary32} from "../lib/Binary32.sol";
import {Referee} from "../lib/Referee.sol";

/// @title Binary32Harness
/// @notice Test harness (not deployed in production): exposes `Binary32` and `Referee` as
/// external batch functions so that one `eth_call` checks many coordinates
/// (tests/referee/test_binary32_agreement.py, tests/forge/Binary32.t.sol). Every value is a
/// binary32 bit pattern (`uint32`).
contract Binary32Harness {
    using Binary32 for uint32;

    /// @notice Two input arrays of different lengths.
    /// @param a the first length.
    /// @param b the second length.
    error Binary32Harness__LengthMismatch(uint256 a, uint256 b);
    /// @notice The per-coordinate counts do not add up to the number of values.
    /// @param values the number of values.
    /// @param counted the sum of the counts.
    error Binary32Harness__CountMismatch(uint256 values, uint256 counted);

    // ---------------------------------------------------------------- primitive ops

    /// @notice out[i] = fl(a[i] + b[i]).
    function addBatch(uint32[] calldata a, uint32[] calldata b) external pure returns (uint32[] memory out) {
        out = _alloc(a.length, b.length);
        for (uint256 i = 0; i < a.length; ++i) out[i] = a[i].add(b[i]);
    }

    /// @notice out[i] = fl(a[i] - b[i]).
    function subBatch(uint32[] calldata a, uint32[] calldata b) external pure returns (uint32[] memory out) {
        out = _alloc(a.length, b.length);
        for (uint256 i = 0; i < a.length; ++i) out[i] = a[i].sub(b[i]);
    }

    /// @notice out[i] = fl(a[i] * b[i]).
    function mulBatch(uint32[] calldata a, uint32[] calldata b) external pure returns (uint32[] memory out) {
        out = _alloc(a.length, b.length);
        for (uint256 i = 0; i < a.length; ++i) out[i] = a[i].mul(b[i]);
    }

    /// @notice out[i] = fl(a[i] / b[i]).
    function divBatch(uint32[] calldata a, uint32[] calldata b) external pure returns (uint32[] memory out) {
        out = _alloc(a.length, b.length);
        for (uint256 i = 0; i < a.length; ++i) out[i] = a[i].div(b[i]);
    }

    /// @notice Binary32.fromUint(n) (reverts with Binary32__UintTooLarge above 2^24).
    function fromUint(uint256 n) external pure returns (uint32) {
        return Binary32.fromUint(n);
    }

    /// @notice Binary32.totalOrderKey(a).
    function totalOrderKey(uint32 a) external pure returns (int32) {
        return a.totalOrderKey();
    }

    /// @notice Binary32.lt(a, b): a < b in totalOrder.
    function lt(uint32 a, uint32 b) external pure returns (bool) {
        return a.lt(b);
    }

    /// @notice Binary32.isFinite(a), Binary32.isNaN(a).
    function classify(uint32 a) external pure returns (bool finite, bool nan) {
        return (a.isFinite(), a.isNaN());
    }

    // ---------------------------------------------------------------- referee

    /// @notice The aggregate of many coordinates: coordinate c has `counts[c]` values, stored
    /// consecutively in `values` (coordinate 0 first), each coordinate's values in ascending
    /// trainer index. Reverts as `Referee.aggregate` does (empty coordinate, trim too large,
    /// Krum, unknown rule).
    /// @param rule 0 = Mean, 1 = TrimmedMean, 2 = CoordinateMedian.
    /// @param values all values, coordinate-major.
    /// @param counts the number of values n of each coordinate.
    /// @param alphaBps TrimmedMean's trim fraction in basis points.
    /// @return out one aggregate per coordinate.
    function aggregateBatch(uint8 rule, uint32[] calldata values, uint32[] calldata counts, uint16 alphaBps)
        external
        pure
        returns (uint32[] memory out)
    {
        out = new uint32[](counts.length);
        uint256 off = 0;
        for (uint256 c = 0; c < counts.length; ++c) {
            uint256 n = counts[c];
            if (off + n > values.length) revert Binary32Harness__CountMismatch(values.length, off + n);
            uint256 fmp = _freeMemoryPointer();
            uint32[] memory xs = new uint32[](n);
            for (uint256 i = 0; i < n; ++i) xs[i] = values[off + i];
            out[c] = Referee.aggregate(rule, xs, alphaBps);
            // Release this coordinate's scratch memory (xs, the sorted copy): nothing allocated
            // after `fmp` is used again, and memory expansion would otherwise grow quadratically.
            _setFreeMemoryPointer(fmp);
            off += n;
        }
        if (off != values.length) revert Binary32Harness__CountMismatch(values.length, off);
    }

    /// @notice The outer Nesterov step on many coordinates with one (lr, mu).
    /// @return pNew the new parameters.
    /// @return mNew the new momentum buffers.
    function nesterovBatch(
        uint32[] calldata p,
        uint32[] calldata m,
        uint32[] calldata g,
        uint32 lr,
        uint32 mu,
        bool nesterovOn
    ) external pure returns (uint32[] memory pNew, uint32[] memory mNew) {
        if (p.length != m.length) revert Binary32Harness__LengthMismatch(p.length, m.length);
        pNew = _alloc(p.length, g.length);
        mNew = new uint32[](p.length);
        for (uint256 i = 0; i < p.length; ++i) {
            (pNew[i], mNew[i]) = Referee.nesterov(p[i], m[i], g[i], lr, mu, nesterovOn);
        }
    }

    // ---------------------------------------------------------------- internal

    function _alloc(uint256 a, uint256 b) private pure returns (uint32[] memory) {
        if (a != b) revert Binary32Harness__LengthMismatch(a, b);
        return new uint32[](a);
    }

    function _freeMemoryPointer() private pure returns (uint256 p) {
        assembly ("memory-safe") {
            p := mload(0x40)
        }
    }

    function _setFreeMemoryPointer(uint256 p) private pure {
        assembly ("memory-safe") {
            mstore(0x40, p)
        }
    }
}
