// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {ITrainingRegistryTypes} from "./interfaces/ITrainingRegistryTypes.sol";
import {ITrainingRegistry} from "./interfaces/ITrainingRegistry.sol";
import {ITrainingRegistryEvidence} from "./interfaces/ITrainingRegistryEvidence.sol";
import {RoundProofs} from "./lib/RoundProofs.sol";
import {RunRoot} from "./lib/RunRoot.sol";
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

    /// @notice `chunkIndex` of a whole-payload availability challenge (PROTOCOL.md §4, issue #23
    /// attack 5): the answer is the whole vector, not one chunk.
    uint32 public constant WHOLE_PAYLOAD = type(uint32).max;

    /// @notice Whether `o` opens chunk `o.chunkIndex` of the committed vector `(root, sumsq)` of n
    /// values; for o.chunkIndex = WHOLE_PAYLOAD, whether o.chunk is the whole vector (`wholeOpens`
    /// with o.siblingS the leaf sums).
    function opens(bytes32 root, uint32 sumsq, uint256 n, ITrainingRegistryTypes.ChunkOpening calldata o)
        external
        pure
        returns (bool)
    {
        if (o.chunkIndex == WHOLE_PAYLOAD) return wholeOpens(root, sumsq, n, o.chunk, o.siblingS);
        return ChunkMerkle.verify(root, sumsq, n, o.chunkIndex, o.chunk, o.siblingH, o.siblingS);
    }

    /// @notice Whether `chunks` (all m = ceil(n / 16) chunks, 64 * m bytes, §2 encoding) with
    /// `sums` (each leaf's sum of squares as committed, m binary32 bit patterns) rebuild the
    /// commitment `(root, sumsq)`: leaf hashes keccak256(0x00 ‖ chunk) from the bytes, the tree
    /// of §2 over them (padded with (0, +0) to a power of two). The leaf sums are the committer's:
    /// a chunk whose committed sum is not its own cannot be opened by anyone (ChunkMerkle.verify
    /// recomputes it), so no proof reads a coordinate the published bytes do not hold. Gas is
    /// about a keccak and a binary32 addition per chunk, plus 16 gas per calldata byte.
    function wholeOpens(bytes32 root, uint32 sumsq, uint256 n, bytes calldata chunks, uint32[] calldata sums)
        public
        pure
        returns (bool)
    {
        uint256 m = ChunkMerkle.numChunks(n);
        if (m == 0 || chunks.length != m * ChunkMerkle.CHUNK_BYTES || sums.length != m) return false;
        uint256 width = RoundProofs.nextPow2(m);
        bytes32[] memory h = new bytes32[](width);
        uint32[] memory s = new uint32[](width);
        for (uint256 i = 0; i < m; ++i) {
            h[i] = keccak256(
                abi.encodePacked(uint8(0), chunks[i * ChunkMerkle.CHUNK_BYTES:(i + 1) * ChunkMerkle.CHUNK_BYTES])
            );
            s[i] = sums[i];
        }
        for (uint256 w = width; w > 1; w >>= 1) {
            for (uint256 i = 0; i < w / 2; ++i) {
                (h[i], s[i]) = ChunkMerkle.node(h[2 * i], s[2 * i], h[2 * i + 1], s[2 * i + 1]);
            }
        }
        return h[0] == root && s[0] == sumsq;
    }

    /// @notice Checks the answer `w` to a weights challenge against what the registry knows (`c`):
    /// 0 when it holds; 1 when w.leaf is not at position c.fragment of c.fragmentsRoot; 2 when
    /// w.fragmentHashes are not the round's (RunRoot.weightsRoot of them is not in c.roundDigest)
    /// or fragmentHashes[c.fragment] is not w.leaf.weightsRoot (the receipt would name another
    /// model); 3 when w.opening does not open the leaf's weights (c.momentum: momentum) commitment.
    function weightsOpening(
        ITrainingRegistryEvidence.WeightsContext calldata c,
        ITrainingRegistryEvidence.WeightsOpening calldata w
    ) external pure returns (uint8) {
        if (!RoundProofs.verifyPath(
                c.fragmentsRoot,
                RoundProofs.fragmentLeaf(w.leaf),
                c.fragment,
                w.leafPath,
                RoundProofs.nextPow2(c.fragmentCount)
            )) return 1;
        bytes32[] calldata hashes = w.fragmentHashes;
        if (
            hashes.length != c.fragmentCount || hashes[c.fragment] != w.leaf.weightsRoot
                || RunRoot.roundDigest(c.round, RunRoot.weightsRoot(hashes), c.transcriptHash, c.acceptedCount)
                    != c.roundDigest
        ) return 2;
        ITrainingRegistryTypes.ChunkOpening calldata o = w.opening;
        (bytes32 root, uint32 sumsq) =
            c.momentum ? (w.leaf.momentumRoot, w.leaf.momentumSumsq) : (w.leaf.weightsRoot, w.leaf.weightsSumsq);
        return ChunkMerkle.verify(root, sumsq, c.n, o.chunkIndex, o.chunk, o.siblingH, o.siblingS) ? 0 : 3;
    }

    /// @notice Checks a root-flow norm reference (`ref`, the previous round's accepted entries of
    /// the fragment) and the screen: 0 when c.target is an outlier against it, 1 when ref.leaf is
    /// not at position c.fragment of c.fragmentsRoot, 2 when the entries are not the leaf's
    /// accepted set (count, ascending order, a slot not in its root), 3 when the set is empty,
    /// 4 when the target is within the screen. Returns each entry's struct hash, for the
    /// registry's signature checks.
    function normReference(
        ITrainingRegistryEvidence.NormContext calldata c,
        ITrainingRegistryEvidence.NormReference calldata ref
    ) external pure returns (uint8 code, bytes32[] memory structHashes) {
        if (!RoundProofs.verifyPath(
                c.fragmentsRoot,
                RoundProofs.fragmentLeaf(ref.leaf),
                c.fragment,
                ref.leafPath,
                RoundProofs.nextPow2(c.fragmentCount)
            )) return (1, structHashes);
        uint256 k = ref.entries.length;
        if (k != ref.leaf.acceptedCount) return (2, structHashes);
        if (k == 0) return (3, structHashes);
        structHashes = new bytes32[](k);
        uint32[] memory sums = new uint32[](k);
        for (uint256 i = 0; i < k; ++i) {
            ITrainingRegistryEvidence.ReferenceEntry calldata e = ref.entries[i];
            if (i != 0 && e.trainerIndex <= ref.entries[i - 1].trainerIndex) return (2, structHashes);
            bytes32 sh = RoundProofs.structHashOfCidHash(
                c.taskId,
                c.previousRound,
                c.fragment,
                e.baseRoot,
                e.payloadRoot,
                e.payloadSumsq,
                e.cidHash,
                e.payloadHash
            );
            if (!RoundProofs.verifyPath(
                    ref.leaf.acceptedRoot,
                    RoundProofs.slotLeaf(e.trainerIndex, sh),
                    e.trainerIndex,
                    e.slotPath,
                    c.slotWidth
                )) return (2, structHashes);
            structHashes[i] = sh;
            sums[i] = e.payloadSumsq;
        }
        uint32 bound = c.screenSq.mul(Referee.coordinateMedian(sums));
        if (Binary32.totalOrderKey(c.target) <= Binary32.totalOrderKey(bound)) return (4, structHashes);
        return (0, structHashes);
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
