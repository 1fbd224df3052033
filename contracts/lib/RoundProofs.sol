// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {ChunkMerkle} from "./ChunkMerkle.sol";
import {Referee} from "./Referee.sol";

/// @title RoundProofs: round commitments of protocol v2 and the aggregate fraud proof
/// @notice The encodings of `contracts/PROTOCOL.md` §6 (a round's `fragmentsRoot`, each
/// fragment's leaf, its accepted-set tree, the submission's EIP-712 struct hash) and the pure
/// check behind a fraud proof: at one coordinate of one fragment, whether the committed new
/// weights or momentum differ from what the task's rule (§1) and the outer step give from the
/// committed inputs. The Python reference is `trainer/tenzro_trainer/round_commitment.py`; both
/// are checked against `tests/vectors/round_commitment_v1.json`.
///
/// Encodings (`‖` = `abi.encodePacked` concatenation, integers big-endian at their width):
/// - struct hash: `keccak256(abi.encode(OUTER_GRADIENT_TYPEHASH, taskId, round, fragment,
///   baseRoot, payloadRoot, payloadSumsq, keccak256(bytes(cid)), payloadHash))`;
/// - slot leaf of trainer i: `keccak256(0x02 ‖ uint16 i ‖ structHash)` (35 bytes), or
///   `bytes32(0)` for a trainer outside the accepted set;
/// - fragment leaf: `keccak256(0x03 ‖ uint16 f ‖ acceptedRoot ‖ uint16 acceptedCount ‖
///   weightsRoot ‖ uint32 weightsSumsq ‖ momentumRoot ‖ uint32 momentumSumsq)` (109 bytes);
/// - positional tree (accepted sets over `nextPow2(max(1, enrolled))` slots, `fragmentsRoot`
///   over `nextPow2(F)` fragment leaves, missing positions `bytes32(0)`): inner node
///   `keccak256(left ‖ right)`; a width-1 tree's root is its one position; a path lists the
///   siblings bottom-up, bit k of the index set = the node is a right child at level k.
///
/// The library is pure and holds no state: signatures, the accepted set known on-chain, the
/// roots and the task's parameters are the caller's (`AggregateContext`).
///
/// Gas (solc 0.8.28, optimizer 200 runs, cancun; `tests/forge/RoundProofs.t.sol::test_gas_*`):
/// `aggregateMismatch` at K = 8 accepted payloads, n = 2^16 (chunk depth 12), Mean, 8 slots,
/// F = 4, proof already in memory: 597k (legacy pipeline, as forge builds) / 507k (via-IR, as
/// ape builds the registry); through an external call with ABI decoding 708k / 609k. Each of the
/// 12 coordinate openings costs ~47k / ~39k (most of it the chunk leaf's 16 squares,
/// `ChunkMerkle.leaf`), the recomputation ~16k / ~12k. The proof is 17.7 kB of calldata
/// (~174k gas of calldata at 16 / 4 gas per non-zero / zero byte).
library RoundProofs {
    // ---------------------------------------------------------------- types

    /// @notice One fragment's leaf of a round's `fragmentsRoot`.
    /// @param fragment the fragment index f (must equal the leaf's position in the tree).
    /// @param acceptedRoot root of the round's accepted-set tree of f (0 in the initial state).
    /// @param acceptedCount the number of accepted submissions K (0 in the initial state).
    /// @param weightsRoot §2 root hash of f's weights after the round (n = fragmentSizes[f]).
    /// @param weightsSumsq §2 root sum of the weights (binary32 bit pattern).
    /// @param momentumRoot §2 root hash of f's outer momentum after the round (0 in the initial
    /// state: the all-(+0) buffer, never opened).
    /// @param momentumSumsq §2 root sum of the momentum (binary32; 0 in the initial state).
    struct FragmentLeaf {
        uint16 fragment;
        bytes32 acceptedRoot;
        uint16 acceptedCount;
        bytes32 weightsRoot;
        uint32 weightsSumsq;
        bytes32 momentumRoot;
        uint32 momentumSumsq;
    }

    /// @notice The §2 opening of one coordinate: chunk `coordinate / 16` and its sibling pairs.
    /// @param chunkIndex the chunk opened; must be `coordinate / 16`.
    /// @param chunk the chunk's 64 bytes (16 big-endian binary32 bit patterns).
    /// @param siblingH sibling hashes from the leaf's sibling up (length ceil(log2 ceil(n / 16))).
    /// @param siblingS sibling sums (binary32 bit patterns), same order and length.
    struct CoordinateOpening {
        uint256 chunkIndex;
        bytes chunk;
        bytes32[] siblingH;
        uint32[] siblingS;
    }

    /// @notice One accepted submission of the fragment, with its slot and its payload opening.
    /// @dev `structHash` is checked against the preimage here (taskId, round and fragment from
    /// the context); the caller checks the trainer's signature over it (EIP-712 digest) and that
    /// the entries' trainer indices are the trainers accepted on-chain.
    /// @param trainerIndex the trainer's enrollment index (its slot in the accepted-set tree).
    /// @param structHash the submission's EIP-712 struct hash (`structHash`).
    /// @param slotPath the slot's path in the accepted-set tree (log2(slotWidth) siblings).
    /// @param baseRoot the submission's `baseRoot` (struct-hash preimage).
    /// @param payloadRoot §2 root hash of the trainer's pseudo-gradient for the fragment.
    /// @param payloadSumsq §2 root sum of the pseudo-gradient (binary32 bit pattern).
    /// @param cidHash `keccak256(bytes(cid))` (struct-hash preimage).
    /// @param payloadHash the submission's `payloadHash` (struct-hash preimage).
    /// @param payload the opening of the pseudo-gradient at the proof's coordinate.
    struct AcceptedEntry {
        uint16 trainerIndex;
        bytes32 structHash;
        bytes32[] slotPath;
        bytes32 baseRoot;
        bytes32 payloadRoot;
        uint32 payloadSumsq;
        bytes32 cidHash;
        bytes32 payloadHash;
        CoordinateOpening payload;
    }

    /// @notice Everything a prover supplies to show one coordinate of one fragment wrong.
    /// @param fragment the fragment f (position in both rounds' fragment trees).
    /// @param coordinate the coordinate c, 0 <= c < fragmentSize.
    /// @param current f's leaf in the challenged round; `currentPath` its path (log2(nextPow2(F))).
    /// @param previous f's leaf in the round before (the initial state for round 0);
    /// `previousPath` its path.
    /// @param entries the accepted submissions, strictly ascending by trainer index, exactly
    /// `current.acceptedCount` of them (none: the aggregate is +0).
    /// @param prevWeights, prevMomentum openings at c of `previous`'s weights and momentum
    /// (`prevMomentum` ignored when the previous state is the initial one).
    /// @param newWeights, newMomentum openings at c of `current`'s weights and momentum.
    struct AggregateOpening {
        uint16 fragment;
        uint256 coordinate;
        FragmentLeaf current;
        bytes32[] currentPath;
        FragmentLeaf previous;
        bytes32[] previousPath;
        AcceptedEntry[] entries;
        CoordinateOpening prevWeights;
        CoordinateOpening prevMomentum;
        CoordinateOpening newWeights;
        CoordinateOpening newMomentum;
    }

    /// @notice What the caller knows from its own state (never from the prover).
    /// @param taskId the task (struct-hash field).
    /// @param round the challenged round r (struct-hash field).
    /// @param fragmentsRoot the root committed for round r.
    /// @param prevFragmentsRoot the root of round r - 1, or the task's `initialFragmentsRoot`.
    /// @param prevIsInitial whether `prevFragmentsRoot` is the initial state (momentum all +0).
    /// @param fragmentCount F >= 1; fragment trees have nextPow2(F) positions.
    /// @param slotWidth P = nextPow2(max(1, enrolledCount)), the accepted-set tree's width.
    /// @param fragmentSize n = fragmentSizes[f], the length of every vector of the fragment.
    /// @param rule the aggregation rule (`Referee.RULE_*`).
    /// @param alphaBps TrimmedMean's trim fraction in basis points.
    /// @param lr float32(spec lr), binary32 bit pattern.
    /// @param mu float32(spec momentum), binary32 bit pattern.
    /// @param nesterovOn Nesterov (true) or heavy-ball (false) momentum.
    struct AggregateContext {
        bytes32 taskId;
        uint32 round;
        bytes32 fragmentsRoot;
        bytes32 prevFragmentsRoot;
        bool prevIsInitial;
        uint16 fragmentCount;
        uint256 slotWidth;
        uint256 fragmentSize;
        uint8 rule;
        uint16 alphaBps;
        uint32 lr;
        uint32 mu;
        bool nesterovOn;
    }

    // ---------------------------------------------------------------- constants

    /// @notice EIP-712 type hash of a trainer's submission.
    bytes32 internal constant OUTER_GRADIENT_TYPEHASH = keccak256(
        "OuterGradient(bytes32 taskId,uint32 round,uint16 fragment,bytes32 baseRoot,bytes32 payloadRoot,uint32 payloadSumsq,string cid,bytes32 payloadHash)"
    );
    /// @notice Domain byte of an accepted-set slot leaf.
    uint8 internal constant SLOT_TAG = 0x02;
    /// @notice Domain byte of a fragment leaf.
    uint8 internal constant FRAGMENT_TAG = 0x03;

    // ---------------------------------------------------------------- errors

    /// @notice The proof names a fragment outside 0..F-1.
    /// @param fragment the fragment given.
    /// @param fragmentCount F.
    error RoundProofs__FragmentOutOfRange(uint256 fragment, uint256 fragmentCount);
    /// @notice The coordinate is not below the fragment's size n.
    /// @param coordinate the coordinate given.
    /// @param n the fragment's size.
    error RoundProofs__CoordinateOutOfRange(uint256 coordinate, uint256 n);
    /// @notice The accepted-set width is not a power of two (a caller's error).
    /// @param width the width given.
    error RoundProofs__BadWidth(uint256 width);
    /// @notice A fragment leaf (and its path) does not verify against the round's root.
    /// @param root the root it was checked against (current or previous round's).
    /// @param fragment the position checked.
    error RoundProofs__FragmentLeafNotInRoot(bytes32 root, uint256 fragment);
    /// @notice The number of entries differs from the current leaf's `acceptedCount`.
    /// @param given the number of entries.
    /// @param acceptedCount the committed count.
    error RoundProofs__EntryCountMismatch(uint256 given, uint256 acceptedCount);
    /// @notice Entry `position`'s trainer index is not above the one before it.
    /// @param position the entry's position in `entries`.
    /// @param trainerIndex its trainer index.
    error RoundProofs__EntriesNotAscending(uint256 position, uint256 trainerIndex);
    /// @notice An entry's `structHash` is not the struct hash of its fields and the context.
    /// @param trainerIndex the entry's trainer index.
    /// @param computed the struct hash of its fields.
    error RoundProofs__StructHashMismatch(uint256 trainerIndex, bytes32 computed);
    /// @notice An entry's slot leaf (and path) does not verify against the accepted-set root.
    /// @param trainerIndex the entry's trainer index (its position).
    /// @param acceptedRoot the root checked against.
    error RoundProofs__SlotNotInAcceptedRoot(uint256 trainerIndex, bytes32 acceptedRoot);
    /// @notice A coordinate opening names another chunk than `coordinate / 16`.
    /// @param chunkIndex the chunk index given.
    /// @param coordinate the coordinate proven.
    error RoundProofs__WrongChunk(uint256 chunkIndex, uint256 coordinate);
    /// @notice A coordinate opening does not verify (`ChunkMerkle.verify`) against its commitment.
    /// @param rootH the commitment's root hash (identifies the vector).
    /// @param rootS the commitment's root sum.
    /// @param chunkIndex the chunk opened.
    error RoundProofs__OpeningNotInRoot(bytes32 rootH, uint32 rootS, uint256 chunkIndex);

    // ---------------------------------------------------------------- encodings

    /// @notice The EIP-712 struct hash of an `OuterGradient` submission.
    /// @param taskId the task.
    /// @param round the round.
    /// @param fragment the fragment.
    /// @param baseRoot the root the trainer started from.
    /// @param payloadRoot §2 root hash of the pseudo-gradient.
    /// @param payloadSumsq §2 root sum of the pseudo-gradient (binary32 bit pattern).
    /// @param cid the payload's IPFS CID (hashed as `keccak256(bytes(cid))`).
    /// @param payloadHash the payload file's hash.
    function structHash(
        bytes32 taskId,
        uint32 round,
        uint16 fragment,
        bytes32 baseRoot,
        bytes32 payloadRoot,
        uint32 payloadSumsq,
        string memory cid,
        bytes32 payloadHash
    ) internal pure returns (bytes32) {
        return structHashOfCidHash(
            taskId, round, fragment, baseRoot, payloadRoot, payloadSumsq, keccak256(bytes(cid)), payloadHash
        );
    }

    /// @notice `structHash` with the CID already hashed (`cidHash = keccak256(bytes(cid))`).
    function structHashOfCidHash(
        bytes32 taskId,
        uint32 round,
        uint16 fragment,
        bytes32 baseRoot,
        bytes32 payloadRoot,
        uint32 payloadSumsq,
        bytes32 cidHash,
        bytes32 payloadHash
    ) internal pure returns (bytes32 h) {
        bytes32 typeHash = OUTER_GRADIENT_TYPEHASH;
        assembly ("memory-safe") {
            // abi.encode of nine static words in the free memory (scratch, not allocated); the
            // uint32 / uint16 fields are masked to their width, as abi.encode cleans them.
            let p := mload(0x40)
            mstore(p, typeHash)
            mstore(add(p, 0x20), taskId)
            mstore(add(p, 0x40), and(round, 0xFFFFFFFF))
            mstore(add(p, 0x60), and(fragment, 0xFFFF))
            mstore(add(p, 0x80), baseRoot)
            mstore(add(p, 0xA0), payloadRoot)
            mstore(add(p, 0xC0), and(payloadSumsq, 0xFFFFFFFF))
            mstore(add(p, 0xE0), cidHash)
            mstore(add(p, 0x100), payloadHash)
            h := keccak256(p, 0x120)
        }
    }

    /// @notice The accepted-set slot leaf of trainer i: keccak256(0x02 ‖ uint16 i ‖ structHash).
    /// @param i the trainer's enrollment index.
    /// @param structHash_ the submission's struct hash.
    function slotLeaf(uint16 i, bytes32 structHash_) internal pure returns (bytes32) {
        return keccak256(abi.encodePacked(SLOT_TAG, i, structHash_));
    }

    /// @notice The fragment leaf: keccak256(0x03 ‖ uint16 f ‖ acceptedRoot ‖ uint16 acceptedCount
    /// ‖ weightsRoot ‖ uint32 weightsSumsq ‖ momentumRoot ‖ uint32 momentumSumsq), 109 bytes.
    /// @param l the leaf's fields.
    function fragmentLeaf(FragmentLeaf memory l) internal pure returns (bytes32) {
        return keccak256(
            abi.encodePacked(
                FRAGMENT_TAG,
                l.fragment,
                l.acceptedRoot,
                l.acceptedCount,
                l.weightsRoot,
                l.weightsSumsq,
                l.momentumRoot,
                l.momentumSumsq
            )
        );
    }

    // ---------------------------------------------------------------- positional trees

    /// @notice The smallest power of two >= max(1, x).
    function nextPow2(uint256 x) internal pure returns (uint256 p) {
        p = 1;
        while (p < x) p <<= 1;
    }

    /// @notice Whether `leaf` is at position `index` of the positional tree of `width` positions
    /// with root `root`.
    /// @dev Returns false (never reverts) when width is not a power of two, index >= width or
    /// `path.length != log2(width)`. Bit k of index set: the node is a right child at level k.
    /// @param root the tree's root.
    /// @param leaf the position's value (a slot or fragment leaf hash).
    /// @param index the position, 0 <= index < width.
    /// @param path the siblings from the leaf's up to the root's child.
    /// @param width the number of positions, a power of two >= 1.
    function verifyPath(bytes32 root, bytes32 leaf, uint256 index, bytes32[] memory path, uint256 width)
        internal
        pure
        returns (bool)
    {
        if (width == 0 || width & (width - 1) != 0 || index >= width) return false;
        uint256 d;
        unchecked {
            // width is a power of two >= 1: d = log2(width) <= 255.
            while ((uint256(1) << d) < width) ++d;
        }
        if (path.length != d) return false;
        bytes32 h = leaf;
        for (uint256 k; k < d; ++k) {
            bytes32 sib = path[k];
            bool right = (index >> k) & 1 == 1;
            assembly ("memory-safe") {
                // keccak256(left ‖ right) in the scratch space 0x00..0x3f.
                switch right
                case 0 {
                    mstore(0x00, h)
                    mstore(0x20, sib)
                }
                default {
                    mstore(0x00, sib)
                    mstore(0x20, h)
                }
                h := keccak256(0x00, 0x40)
            }
        }
        return h == root;
    }

    // ---------------------------------------------------------------- openings

    /// @notice The committed value at `coordinate` of the vector with §2 commitment
    /// `(rootH, rootS)` and length n.
    /// @dev Reverts `RoundProofs__CoordinateOutOfRange` (coordinate >= n), `RoundProofs__WrongChunk`
    /// (chunkIndex != coordinate / 16) or `RoundProofs__OpeningNotInRoot` (`ChunkMerkle.verify`
    /// false: wrong chunk bytes, siblings, proof length or commitment).
    /// @return the value's binary32 bit pattern.
    function openValue(bytes32 rootH, uint32 rootS, uint256 n, uint256 coordinate, CoordinateOpening memory o)
        internal
        pure
        returns (uint32)
    {
        if (coordinate >= n) revert RoundProofs__CoordinateOutOfRange(coordinate, n);
        uint256 i = coordinate / ChunkMerkle.CHUNK_VALUES;
        if (o.chunkIndex != i) revert RoundProofs__WrongChunk(o.chunkIndex, coordinate);
        if (!ChunkMerkle.verify(rootH, rootS, n, i, o.chunk, o.siblingH, o.siblingS)) {
            revert RoundProofs__OpeningNotInRoot(rootH, rootS, i);
        }
        return ChunkMerkle.valueAt(o.chunk, coordinate % ChunkMerkle.CHUNK_VALUES);
    }

    // ---------------------------------------------------------------- recomputation

    /// @notice One coordinate of a round (PROTOCOL.md §1): g = aggregate(rule, xs) (+0 when xs is
    /// empty), then the outer step from (prevW, prevM). All values binary32 bit patterns.
    /// @dev Reverts as `Referee.aggregate` does (Krum, unknown rule, TrimmedMean trimming all).
    /// @param rule the rule (`Referee.RULE_*`).
    /// @param alphaBps TrimmedMean's trim fraction in basis points.
    /// @param xs the accepted values in ascending trainer index (may be empty).
    /// @param prevW the weight before the round.
    /// @param prevM the momentum before the round.
    /// @param lr float32(spec lr).
    /// @param mu float32(spec momentum).
    /// @param nesterovOn Nesterov or heavy-ball.
    /// @return w the weight after the round.
    /// @return m the momentum after the round.
    function recompute(
        uint8 rule,
        uint16 alphaBps,
        uint32[] memory xs,
        uint32 prevW,
        uint32 prevM,
        uint32 lr,
        uint32 mu,
        bool nesterovOn
    ) internal pure returns (uint32 w, uint32 m) {
        uint32 g = xs.length == 0 ? 0 : Referee.aggregate(rule, xs, alphaBps);
        return Referee.nesterov(prevW, prevM, g, lr, mu, nesterovOn);
    }

    // ---------------------------------------------------------------- the fraud proof

    /// @notice Whether the round committed in `ctx.fragmentsRoot` is wrong at `o.coordinate` of
    /// fragment `o.fragment`: true iff recomputing the coordinate from the committed inputs
    /// gives another weight or momentum (bitwise) than the committed ones, or the current leaf
    /// carries another fragment index than its position (a malformed commitment).
    /// @dev Every piece of the proof is verified first; a failed verification reverts (the proof
    /// is bad, not the commitment): `RoundProofs__FragmentOutOfRange`,
    /// `RoundProofs__CoordinateOutOfRange`, `RoundProofs__BadWidth` (ctx.slotWidth),
    /// `RoundProofs__FragmentLeafNotInRoot` (current against `fragmentsRoot`, previous against
    /// `prevFragmentsRoot`, both at position `o.fragment` of nextPow2(F)),
    /// `RoundProofs__EntryCountMismatch`, `RoundProofs__EntriesNotAscending`,
    /// `RoundProofs__StructHashMismatch`, `RoundProofs__SlotNotInAcceptedRoot` (each entry's slot
    /// against `current.acceptedRoot`), `RoundProofs__WrongChunk` / `RoundProofs__OpeningNotInRoot`
    /// (each entry's payload with n = ctx.fragmentSize, the previous weights and momentum, the new
    /// weights and momentum), and `Referee`'s errors. With `ctx.prevIsInitial` the previous
    /// momentum is +0 and `o.prevMomentum` is not read. The previous leaf's own `fragment` field
    /// is not compared (that round is final; its position decides).
    /// The caller still checks each entry's signature over `entries[i].structHash` and that the
    /// entries' `trainerIndex` set is the round's accepted set on-chain.
    /// @param o the proof.
    /// @param ctx the caller's state.
    /// @return whether the commitment is wrong at that coordinate.
    function aggregateMismatch(AggregateOpening memory o, AggregateContext memory ctx) internal pure returns (bool) {
        uint256 n = ctx.fragmentSize;
        if (o.fragment >= ctx.fragmentCount) revert RoundProofs__FragmentOutOfRange(o.fragment, ctx.fragmentCount);
        if (o.coordinate >= n) revert RoundProofs__CoordinateOutOfRange(o.coordinate, n);
        if (ctx.slotWidth == 0 || ctx.slotWidth & (ctx.slotWidth - 1) != 0) {
            revert RoundProofs__BadWidth(ctx.slotWidth);
        }
        uint256 width = nextPow2(ctx.fragmentCount);
        if (!verifyPath(ctx.fragmentsRoot, fragmentLeaf(o.current), o.fragment, o.currentPath, width)) {
            revert RoundProofs__FragmentLeafNotInRoot(ctx.fragmentsRoot, o.fragment);
        }
        if (!verifyPath(ctx.prevFragmentsRoot, fragmentLeaf(o.previous), o.fragment, o.previousPath, width)) {
            revert RoundProofs__FragmentLeafNotInRoot(ctx.prevFragmentsRoot, o.fragment);
        }
        // The leaf at position f must say f; one that does not is the committer's fault.
        if (o.current.fragment != o.fragment) return true;

        return _differs(o, ctx, _acceptedValues(o, ctx));
    }

    // ---------------------------------------------------------------- internal

    /// @dev Opens the previous and new weight and momentum at the coordinate, recomputes the
    /// round from the accepted values `xs` and compares bitwise. (A separate function, with the
    /// four values in one memory array: the legacy pipeline runs out of stack slots otherwise.)
    function _differs(AggregateOpening memory o, AggregateContext memory ctx, uint32[] memory xs)
        private
        pure
        returns (bool)
    {
        uint256 n = ctx.fragmentSize;
        uint256 c = o.coordinate;
        uint32[4] memory v; // previous weight, previous momentum, new weight, new momentum
        v[0] = openValue(o.previous.weightsRoot, o.previous.weightsSumsq, n, c, o.prevWeights);
        if (!ctx.prevIsInitial) {
            v[1] = openValue(o.previous.momentumRoot, o.previous.momentumSumsq, n, c, o.prevMomentum);
        }
        v[2] = openValue(o.current.weightsRoot, o.current.weightsSumsq, n, c, o.newWeights);
        v[3] = openValue(o.current.momentumRoot, o.current.momentumSumsq, n, c, o.newMomentum);
        (uint32 w, uint32 m) = recompute(ctx.rule, ctx.alphaBps, xs, v[0], v[1], ctx.lr, ctx.mu, ctx.nesterovOn);
        return w != v[2] || m != v[3];
    }

    /// @dev Verifies the entries (count, order, struct hash, slot, payload opening) and returns
    /// their values at the coordinate, in ascending trainer index.
    function _acceptedValues(AggregateOpening memory o, AggregateContext memory ctx)
        private
        pure
        returns (uint32[] memory xs)
    {
        uint256 k = o.entries.length;
        if (k != o.current.acceptedCount) revert RoundProofs__EntryCountMismatch(k, o.current.acceptedCount);
        xs = new uint32[](k);
        bytes32 acceptedRoot = o.current.acceptedRoot;
        for (uint256 i; i < k; ++i) {
            AcceptedEntry memory e = o.entries[i];
            if (i > 0 && e.trainerIndex <= o.entries[i - 1].trainerIndex) {
                revert RoundProofs__EntriesNotAscending(i, e.trainerIndex);
            }
            bytes32 sh = structHashOfCidHash(
                ctx.taskId, ctx.round, o.fragment, e.baseRoot, e.payloadRoot, e.payloadSumsq, e.cidHash, e.payloadHash
            );
            if (sh != e.structHash) revert RoundProofs__StructHashMismatch(e.trainerIndex, sh);
            if (!verifyPath(acceptedRoot, slotLeaf(e.trainerIndex, sh), e.trainerIndex, e.slotPath, ctx.slotWidth)) {
                revert RoundProofs__SlotNotInAcceptedRoot(e.trainerIndex, acceptedRoot);
            }
            xs[i] = openValue(e.payloadRoot, e.payloadSumsq, ctx.fragmentSize, o.coordinate, e.payload);
        }
    }
}
