// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {RoundProofs} from "../lib/RoundProofs.sol";

/// @title RoundProofsHarness
/// @notice Test harness (not deployed in production): exposes the internal functions of
/// `RoundProofs` (contracts/PROTOCOL.md §6) as external ones, for tests/forge/RoundProofs.t.sol
/// and for Python tests through ape. Values and sums are binary32 bit patterns (`uint32`).
contract RoundProofsHarness {
    /// @notice `RoundProofs.OUTER_GRADIENT_TYPEHASH`.
    function typeHash() external pure returns (bytes32) {
        return RoundProofs.OUTER_GRADIENT_TYPEHASH;
    }

    /// @notice `RoundProofs.structHash`: the EIP-712 struct hash of an OuterGradient submission.
    function structHash(
        bytes32 taskId,
        uint32 round,
        uint16 fragment,
        bytes32 baseRoot,
        bytes32 payloadRoot,
        uint32 payloadSumsq,
        string memory cid,
        bytes32 payloadHash
    ) external pure returns (bytes32) {
        return RoundProofs.structHash(taskId, round, fragment, baseRoot, payloadRoot, payloadSumsq, cid, payloadHash);
    }

    /// @notice `RoundProofs.slotLeaf`: keccak256(0x02 ‖ uint16 i ‖ structHash).
    function slotLeaf(uint16 i, bytes32 structHash_) external pure returns (bytes32) {
        return RoundProofs.slotLeaf(i, structHash_);
    }

    /// @notice `RoundProofs.fragmentLeaf`: the 109-byte packed fragment leaf's keccak256.
    function fragmentLeaf(RoundProofs.FragmentLeaf memory l) external pure returns (bytes32) {
        return RoundProofs.fragmentLeaf(l);
    }

    /// @notice `RoundProofs.nextPow2`: the smallest power of two >= max(1, x).
    function nextPow2(uint256 x) external pure returns (uint256) {
        return RoundProofs.nextPow2(x);
    }

    /// @notice `RoundProofs.verifyPath`: whether `leaf` is at `index` of the width-`width` tree.
    function verifyPath(bytes32 root, bytes32 leaf, uint256 index, bytes32[] memory path, uint256 width)
        external
        pure
        returns (bool)
    {
        return RoundProofs.verifyPath(root, leaf, index, path, width);
    }

    /// @notice `RoundProofs.openValue`: the committed value at `coordinate` (reverts if unproven).
    function openValue(
        bytes32 rootH,
        uint32 rootS,
        uint256 n,
        uint256 coordinate,
        RoundProofs.CoordinateOpening memory o
    ) external pure returns (uint32) {
        return RoundProofs.openValue(rootH, rootS, n, coordinate, o);
    }

    /// @notice `RoundProofs.recompute`: aggregate (+0 for no values) then the outer step.
    function recompute(
        uint8 rule,
        uint16 alphaBps,
        uint32[] memory xs,
        uint32 prevW,
        uint32 prevM,
        uint32 lr,
        uint32 mu,
        bool nesterovOn
    ) external pure returns (uint32 w, uint32 m) {
        return RoundProofs.recompute(rule, alphaBps, xs, prevW, prevM, lr, mu, nesterovOn);
    }

    /// @notice `RoundProofs.aggregateMismatch`: whether the round's commitment is wrong at the
    /// proof's coordinate (reverts when the proof does not verify).
    function aggregateMismatch(RoundProofs.AggregateOpening memory o, RoundProofs.AggregateContext memory ctx)
        external
        pure
        returns (bool)
    {
        return RoundProofs.aggregateMismatch(o, ctx);
    }
}
