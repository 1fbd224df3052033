// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {Binary32} from "./Binary32.sol";

/// @title Referee
/// @notice The per-coordinate recomputation of protocol v2 (contracts/PROTOCOL.md §1): the
/// aggregation rules `Mean`, `TrimmedMean(alpha_bps)` and `CoordinateMedian` over the n
/// accepted values of one coordinate, and the outer Nesterov step, each as the fixed sequence of
/// binary32 operations the protocol defines (`Binary32`), so that the result agrees bit for bit
/// with the trainer's canonical path (`trainer/tenzro_trainer/canonical.py`).
///
/// Inputs are binary32 bit patterns (`uint32`) in ascending trainer index (`x_1 .. x_n`). The
/// rules expect finite inputs (non-finite payloads are rejected before aggregation, PROTOCOL.md §4); they
/// still compute IEEE results for inf or NaN inputs, but those are outside the protocol.
/// No function mutates the caller's array: sorting works on a copy.
///
/// Gas of one coordinate, values already in memory (`tests/forge/Binary32.t.sol::test_gas_referee`,
/// gradient-like random inputs, solc 0.8.28, optimizer 200 runs, legacy / via-IR): Mean
/// 10.3k / 8.4k at K = 8, 69k / 58k at K = 64; TrimmedMean(10 %) 14.4k / 13.0k at K = 8,
/// 109k / 107k at K = 64; CoordinateMedian 6.8k / 6.7k at K = 8, 54k / 61k at K = 64; one
/// Nesterov step 5.6k / 4.2k. Roughly one binary32 op (~0.6-1k gas) per value plus ~0.8k gas per
/// value for sorting. See contracts/GAS.md.
library Referee {
    using Binary32 for uint32;

    // ---------------------------------------------------------------- errors

    /// @notice A rule was given no values (n = 0).
    error Referee__NoValues();
    /// @notice TrimmedMean would trim everything: b = floor(n * alphaBps / 10000) and 2b >= n.
    /// @param n the number of values.
    /// @param alphaBps the trim fraction in basis points.
    /// @param b the trim count.
    error Referee__TrimTooLarge(uint256 n, uint16 alphaBps, uint256 b);
    /// @notice Krum (rule 3) is not defined coordinate-wise, so no coordinate can be re-checked
    /// on-chain; Open-tier tasks refuse it (PROTOCOL.md §1, §3).
    /// @param rule the rule id given.
    error Referee__RuleNotProvable(uint8 rule);
    /// @notice A rule id outside 0..3.
    /// @param rule the rule id given.
    error Referee__UnknownRule(uint8 rule);

    // ---------------------------------------------------------------- constants

    /// @notice Rule ids, as `TaskParams.aggregation` (ITrainingRegistry).
    uint8 internal constant RULE_MEAN = 0;
    uint8 internal constant RULE_TRIMMED_MEAN = 1;
    uint8 internal constant RULE_COORDINATE_MEDIAN = 2;
    uint8 internal constant RULE_KRUM = 3;

    // ---------------------------------------------------------------- rules

    /// @notice The aggregate of one coordinate under `rule`.
    /// @param rule 0 = Mean, 1 = TrimmedMean, 2 = CoordinateMedian (3 = Krum reverts).
    /// @param xs the n values (binary32 bit patterns) in ascending trainer index.
    /// @param alphaBps TrimmedMean's trim fraction in basis points (ignored by other rules).
    /// @return the aggregate (binary32 bit pattern).
    function aggregate(uint8 rule, uint32[] memory xs, uint16 alphaBps) internal pure returns (uint32) {
        if (rule == RULE_MEAN) return mean(xs);
        if (rule == RULE_TRIMMED_MEAN) return trimmedMean(xs, alphaBps);
        if (rule == RULE_COORDINATE_MEDIAN) return coordinateMedian(xs);
        if (rule == RULE_KRUM) revert Referee__RuleNotProvable(rule);
        revert Referee__UnknownRule(rule);
    }

    /// @notice Mean: acc = +0; for i = 1..n: acc = fl(acc + x_i); result fl(acc / n).
    /// @param xs the n >= 1 values in ascending trainer index.
    /// @return the mean (binary32 bit pattern).
    function mean(uint32[] memory xs) internal pure returns (uint32) {
        if (xs.length == 0) revert Referee__NoValues();
        return _meanRange(xs, 0, xs.length);
    }

    /// @notice TrimmedMean(alphaBps): b = floor(n * alphaBps / 10000), requires 2b < n; sort by
    /// totalOrder; Mean of the sorted values b .. n-b-1, summed in sorted order.
    /// @param xs the n >= 1 values in ascending trainer index (not modified).
    /// @param alphaBps the trim fraction in basis points (1000 = 10 %).
    /// @return the trimmed mean (binary32 bit pattern).
    function trimmedMean(uint32[] memory xs, uint16 alphaBps) internal pure returns (uint32) {
        uint256 n = xs.length;
        if (n == 0) revert Referee__NoValues();
        uint256 b = (n * alphaBps) / 10000;
        if (2 * b >= n) revert Referee__TrimTooLarge(n, alphaBps, b);
        return _meanRange(sortedCopy(xs), b, n - b);
    }

    /// @notice CoordinateMedian: sort by totalOrder; n odd: s_{(n-1)/2};
    /// n even: fl(fl(s_{n/2-1} + s_{n/2}) / 2).
    /// @param xs the n >= 1 values in ascending trainer index (not modified).
    /// @return the median (binary32 bit pattern).
    function coordinateMedian(uint32[] memory xs) internal pure returns (uint32) {
        uint256 n = xs.length;
        if (n == 0) revert Referee__NoValues();
        uint32[] memory s = sortedCopy(xs);
        if (n % 2 == 1) return s[n / 2];
        return s[n / 2 - 1].add(s[n / 2]).div(Binary32.TWO);
    }

    /// @notice The outer step for one coordinate (SGD with Nesterov momentum, dampening 0, no
    /// weight decay; Sutskever et al. 2013 in torch.optim.SGD's form), PROTOCOL.md §1:
    /// m' = fl(fl(mu * m) + g); u = fl(g + fl(mu * m')) (or u = m' without Nesterov);
    /// p' = fl(p - fl(lr * u)).
    /// @param p the parameter (binary32 bit pattern, as all values here).
    /// @param m the momentum buffer (+0 at the start of a run).
    /// @param g the aggregate of the round (+0 for a fragment without accepted submissions).
    /// @param lr the learning rate, float32(spec lr).
    /// @param mu the momentum, float32(spec momentum).
    /// @param nesterovOn Nesterov momentum (true) or heavy-ball (false).
    /// @return pNew the new parameter.
    /// @return mNew the new momentum buffer.
    function nesterov(uint32 p, uint32 m, uint32 g, uint32 lr, uint32 mu, bool nesterovOn)
        internal
        pure
        returns (uint32 pNew, uint32 mNew)
    {
        mNew = mu.mul(m).add(g);
        uint32 u = nesterovOn ? g.add(mu.mul(mNew)) : mNew;
        pNew = p.sub(lr.mul(u));
    }

    // ---------------------------------------------------------------- sorting

    /// @notice A copy of xs sorted ascending by IEEE-754 totalOrder (`Binary32.totalOrderKey`):
    /// -inf < ... < -0 < +0 < ... < +inf. Binary insertion sort: O(n log n) compares and O(n)
    /// memory moves of at most n words each (MCOPY, so the EVM target must be cancun or later).
    /// @param xs binary32 bit patterns (not modified).
    /// @return s the sorted copy.
    function sortedCopy(uint32[] memory xs) internal pure returns (uint32[] memory s) {
        uint256 n = xs.length;
        s = new uint32[](n);
        assembly ("memory-safe") {
            // Binary insertion sort of order keys, written into s (allocated above, n words): the
            // key of pattern u is u ^ 0xFFFFFFFF for negatives and u ^ 0x80000000 otherwise,
            // i.e. totalOrderKey(u) + 2^31, so unsigned comparison of keys is totalOrder. Each
            // key goes after the sorted keys that are <= it (an upper-bound binary search, so
            // the sort is stable), and the larger ones move up one slot with one MCOPY
            // (EIP-5656, cancun). Keys are < 2^32 and pointers stay inside xs and s.
            let base := add(s, 0x20)
            let src := add(xs, 0x20)
            for { let i := 0 } lt(i, n) { i := add(i, 1) } {
                let u := and(mload(add(src, shl(5, i))), 0xFFFFFFFF)
                let key := xor(u, or(0x80000000, mul(shr(31, u), 0x7FFFFFFF)))
                let lo := 0
                let hi := i
                for {} lt(lo, hi) {} {
                    let mid := shr(1, add(lo, hi))
                    if gt(mload(add(base, shl(5, mid))), key) {
                        hi := mid
                        continue
                    }
                    lo := add(mid, 1)
                }
                let at := add(base, shl(5, lo))
                mcopy(add(at, 0x20), at, shl(5, sub(i, lo)))
                mstore(at, key)
            }
            // Keys back to patterns: top bit set (was non-negative) -> ^ 0x80000000, else ^ 0xFFFFFFFF.
            let end := add(base, shl(5, n))
            for { let p := base } lt(p, end) { p := add(p, 0x20) } {
                let key := mload(p)
                mstore(p, xor(key, or(0x80000000, mul(iszero(shr(31, key)), 0x7FFFFFFF))))
            }
        }
    }

    // ---------------------------------------------------------------- internal

    /// @dev Mean of xs[from .. to-1] in that order: acc = +0, acc = fl(acc + x), fl(acc / count).
    function _meanRange(uint32[] memory xs, uint256 from, uint256 to) private pure returns (uint32) {
        uint32 acc = 0;
        for (uint256 i = from; i < to;) {
            acc = acc.add(xs[i]);
            unchecked {
                ++i; // i < to <= xs.length
            }
        }
        return acc.div(Binary32.fromUint(to - from));
    }
}
