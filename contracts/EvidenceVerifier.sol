// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {ITrainingRegistryTypes} from "./interfaces/ITrainingRegistryTypes.sol";
import {ITrainingRegistry} from "./interfaces/ITrainingRegistry.sol";
import {Binary32} from "./lib/Binary32.sol";
import {ChunkMerkle} from "./lib/ChunkMerkle.sol";
import {Referee} from "./lib/Referee.sol";

/// @title EvidenceVerifier
/// @notice The checks behind a slash (contracts/PROTOCOL.md §4): whether an opened chunk of a
/// committed pseudo-gradient holds a non-finite value or bad padding, and whether a signed sum
/// of squares is a norm outlier among the fragment's submissions. Stateless; the registry
/// deploys one in its constructor and calls it (keeps the registry under 24 KiB, like
/// ReceiptBuilder). Values are binary32 bit patterns (uint32); n is the fragment size in values.
contract EvidenceVerifier {
    using Binary32 for uint32;

    /// @notice What an opened chunk shows.
    uint8 public constant SOUND = 0;
    uint8 public constant NON_FINITE = 1;
    uint8 public constant BAD_PADDING = 2;

    /// @notice Whether `o` opens chunk `o.chunkIndex` of the committed vector `(root, sumsq)` of n values.
    function opens(bytes32 root, uint32 sumsq, uint256 n, ITrainingRegistryTypes.ChunkOpening calldata o)
        external
        pure
        returns (bool)
    {
        return ChunkMerkle.verify(root, sumsq, n, o.chunkIndex, o.chunk, o.siblingH, o.siblingS);
    }

    /// @notice The defect an opened chunk shows: SOUND, NON_FINITE (a NaN or infinity at a
    /// coordinate < n) or BAD_PADDING (a value other than +0 at a coordinate >= n).
    /// @return defect one of the constants; 255 when the opening does not verify.
    function chunkDefect(bytes32 root, uint32 sumsq, uint256 n, ITrainingRegistryTypes.ChunkOpening calldata o)
        external
        pure
        returns (uint8 defect)
    {
        bytes memory chunk = o.chunk;
        if (!ChunkMerkle.verify(root, sumsq, n, o.chunkIndex, chunk, o.siblingH, o.siblingS)) return 255;
        uint256 first = uint256(o.chunkIndex) * ChunkMerkle.CHUNK_VALUES;
        for (uint256 j = 0; j < ChunkMerkle.CHUNK_VALUES && first + j < n; ++j) {
            // exponent all ones: infinity or NaN
            if ((ChunkMerkle.valueAt(chunk, j) >> 23) & 0xFF == 0xFF) return NON_FINITE;
        }
        if (!ChunkMerkle.paddingIsZero(chunk, n, o.chunkIndex)) return BAD_PADDING;
        return SOUND;
    }

    /// @notice Whether `target` > fl(screenSq * median(sums)) in IEEE totalOrder, the median being
    /// Referee.coordinateMedian (binary32) of every submission's signed sum of squares
    /// (the target's included), so the screen is the one the syncer's Python path applies.
    /// @param target the challenged submission's sum of squares.
    /// @param sums every submitted sum of squares of the fragment in ascending trainer index (>= 1).
    /// @param screenSq the task's normScreenSq (binary32).
    function normOutlier(uint32 target, uint32[] calldata sums, uint32 screenSq) external pure returns (bool) {
        uint32 bound = screenSq.mul(Referee.coordinateMedian(sums));
        return Binary32.totalOrderKey(target) > Binary32.totalOrderKey(bound);
    }
}
