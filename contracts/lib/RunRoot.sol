// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

/// @title RunRoot: receipt and run-root encoding v1 of tenzro-train
/// @notice Pure helpers that compute the hashes of a training run exactly as
/// `contracts/RECEIPT.md` defines them; the Python reference is
/// `operator/tenzro_operator/receipt.py`, and both are checked against
/// `tests/vectors/run_root_v1.json`.
///
/// Encoding v1 (all integers big-endian, fixed width; `||` concatenation;
/// `sha256` the 0x02 precompile; DOMAIN = the 24 ASCII bytes
/// `tenzro/train/run-root/v1`):
/// - weightsRoot   = sha256(DOMAIN || 0x03 || uint32(F) || h_0 || ... || h_{F-1})
/// - roundDigest_r = sha256(DOMAIN || 0x02 || uint32(r) || weightsRoot_r || transcriptHash_r || uint32(acceptedCount_r)),
///   in the receipt folded with the round's challenge status s when s != 0:
///   sha256(DOMAIN || 0x04 || roundDigest_r || uint8(s)) (`withStatus`)
/// - Merkle node   = sha256(DOMAIN || 0x01 || left || right); pairs left to right,
///   an odd last node is carried up unchanged; one leaf is its own root.
/// - transcriptRoot = Merkle root over sha256(DOMAIN || 0x00 || uint32(r) || transcriptHash_r)
/// - receipt = header189 || roundDigest_0 || ... || roundDigest_{R-1}, with
///   header189 = 0x01 || uint256 chainId || address registry || taskId || specHash
///               || finalModelHash || transcriptRoot || uint32 R || uint32 trainerCount
/// - runRoot = Merkle root over leaf_0 = sha256(DOMAIN || 0x00 || header189) and
///   leaf_{1+r} = sha256(DOMAIN || 0x00 || uint32(r) || roundDigest_r).
library RunRoot {
    // ------------------------------------------------------------------ constants

    /// @notice Domain prefix of every hash in encoding v1.
    bytes24 internal constant DOMAIN = "tenzro/train/run-root/v1";
    /// @notice Tag byte of a leaf (header, round or transcript leaf).
    bytes1 internal constant TAG_LEAF = 0x00;
    /// @notice Tag byte of an inner Merkle node.
    bytes1 internal constant TAG_NODE = 0x01;
    /// @notice Tag byte of a round digest.
    bytes1 internal constant TAG_ROUND = 0x02;
    /// @notice Tag byte of a weights root.
    bytes1 internal constant TAG_WEIGHTS = 0x03;
    /// @notice Tag byte of a round digest folded with its challenge status.
    bytes1 internal constant TAG_STATUS = 0x04;
    /// @notice Challenge status of a round whose window passed unchallenged (its digest as is).
    uint8 internal constant STATUS_UNCHALLENGED = 0;
    /// @notice Challenge status of a round that was challenged and survived (a challenge lost).
    uint8 internal constant STATUS_CHALLENGE_LOST = 1;
    /// @notice Version byte of a serialized receipt.
    uint8 internal constant VERSION = 1;
    /// @notice Length of the receipt header in bytes.
    uint256 internal constant HEADER_LENGTH = 189;

    // Byte offsets of the header fields.
    uint256 private constant OFF_CHAIN_ID = 1;
    uint256 private constant OFF_REGISTRY = 33;
    uint256 private constant OFF_TASK_ID = 53;
    uint256 private constant OFF_SPEC_HASH = 85;
    uint256 private constant OFF_FINAL_MODEL = 117;
    uint256 private constant OFF_TRANSCRIPT_ROOT = 149;
    uint256 private constant OFF_ROUNDS = 181;
    uint256 private constant OFF_TRAINERS = 185;

    // ------------------------------------------------------------------ errors

    /// @notice A list that must hold at least one hash was empty.
    error RunRootEmptyList();
    /// @notice A count does not fit in the uint32 field the encoding gives it.
    error RunRootCountTooLarge(uint256 count);
    /// @notice `rounds` disagrees with the number of round digests given.
    error RunRootRoundCountMismatch(uint32 rounds, uint256 digests);
    /// @notice A serialized receipt is not well formed (see `isWellFormed`).
    error RunRootMalformedReceipt(uint256 length);

    // ------------------------------------------------------------------ types

    /// @notice The decoded 189-byte receipt header.
    struct Header {
        uint8 version;
        uint256 chainId;
        address registry;
        bytes32 taskId;
        bytes32 specHash;
        bytes32 finalModelHash;
        bytes32 transcriptRoot;
        uint32 rounds;
        uint32 trainerCount;
    }

    // ------------------------------------------------------------------ hashes of a run

    /// @notice Weights root of one round (also the model hash).
    /// @param fragmentHashes sha256 of each fragment's safetensors bytes, fragment 0 first (F >= 1).
    /// @return sha256(DOMAIN || 0x03 || uint32(F) || h_0 || ... || h_{F-1}).
    function weightsRoot(bytes32[] memory fragmentHashes) internal pure returns (bytes32) {
        uint256 f = fragmentHashes.length;
        if (f == 0) revert RunRootEmptyList();
        if (f > type(uint32).max) revert RunRootCountTooLarge(f);
        // casting to 'uint32' is safe because f <= type(uint32).max was checked above
        // forge-lint: disable-next-line(unsafe-typecast)
        return sha256(abi.encodePacked(DOMAIN, TAG_WEIGHTS, uint32(f), fragmentHashes));
    }

    /// @notice Digest of round `round` (rounds are numbered from 0).
    /// @param round the round number r.
    /// @param weightsRoot_ the weights root committed by commitRound of round r (RunRoot over its fragment hashes).
    /// @param transcriptHash sha256 of the round's canonical transcript JSON (opaque here).
    /// @param acceptedCount accepted (trainer, fragment) submissions in round r.
    /// @return sha256(DOMAIN || 0x02 || uint32(r) || weightsRoot_r || transcriptHash_r || uint32(acceptedCount_r)).
    function roundDigest(uint32 round, bytes32 weightsRoot_, bytes32 transcriptHash, uint32 acceptedCount)
        internal
        pure
        returns (bytes32)
    {
        return sha256(abi.encodePacked(DOMAIN, TAG_ROUND, round, weightsRoot_, transcriptHash, acceptedCount));
    }

    /// @notice A round digest as the receipt carries it: unchanged for status 0 (the round's
    /// challenge window passed unchallenged), else sha256(DOMAIN || 0x04 || roundDigest || uint8(status))
    /// (status 1: challenged, and the challenge lost). A round proven wrong never reaches a receipt.
    /// @param roundDigest_ the round's digest (`roundDigest`).
    /// @param status the round's challenge status (`STATUS_*`).
    function withStatus(bytes32 roundDigest_, uint8 status) internal pure returns (bytes32) {
        if (status == STATUS_UNCHALLENGED) return roundDigest_;
        return sha256(abi.encodePacked(DOMAIN, TAG_STATUS, roundDigest_, status));
    }

    /// @notice Leaf of round r in the transcript tree and in the run tree (same shape, different trees).
    /// @return sha256(DOMAIN || 0x00 || uint32(r) || h).
    function indexedLeaf(uint32 round, bytes32 h) internal pure returns (bytes32) {
        return sha256(abi.encodePacked(DOMAIN, TAG_LEAF, round, h));
    }

    /// @notice Transcript root: Merkle root over indexedLeaf(r, transcriptHash_r), r = 0..R-1 (R >= 1).
    function transcriptRoot(bytes32[] memory transcriptHashes) internal pure returns (bytes32) {
        uint256 n = transcriptHashes.length;
        if (n == 0) revert RunRootEmptyList();
        if (n > type(uint32).max) revert RunRootCountTooLarge(n);
        bytes32[] memory leaves = new bytes32[](n);
        for (uint256 r = 0; r < n; ++r) {
            // casting to 'uint32' is safe because r < n <= type(uint32).max
            // forge-lint: disable-next-line(unsafe-typecast)
            leaves[r] = indexedLeaf(uint32(r), transcriptHashes[r]);
        }
        return _foldInPlace(leaves);
    }

    /// @notice Merkle root over `leaves` (n >= 1) as encoding v1 defines it; `leaves` is left untouched.
    function merkleRoot(bytes32[] memory leaves) internal pure returns (bytes32) {
        uint256 n = leaves.length;
        if (n == 0) revert RunRootEmptyList();
        bytes32[] memory copy = new bytes32[](n);
        for (uint256 i = 0; i < n; ++i) {
            copy[i] = leaves[i];
        }
        return _foldInPlace(copy);
    }

    // ------------------------------------------------------------------ receipt

    /// @notice Serializes a receipt: the 189-byte header followed by the R round digests
    /// (`189 + 32 R` bytes), without the claimed run root.
    /// @param chainId chain id of the registry's chain.
    /// @param registry the TrainingRegistry that sealed the run.
    /// @param rounds R, must equal roundDigests.length and be >= 1.
    /// @param trainerCount number of trainers ever enrolled in the run.
    /// @param roundDigests roundDigest_0 .. roundDigest_{R-1}.
    function encodeReceipt(
        uint256 chainId,
        address registry,
        bytes32 taskId,
        bytes32 specHash,
        bytes32 finalModelHash,
        bytes32 transcriptRoot_,
        uint32 rounds,
        uint32 trainerCount,
        bytes32[] memory roundDigests
    ) internal pure returns (bytes memory) {
        if (rounds == 0 || roundDigests.length != rounds) {
            revert RunRootRoundCountMismatch(rounds, roundDigests.length);
        }
        return abi.encodePacked(
            bytes1(VERSION),
            chainId,
            registry,
            taskId,
            specHash,
            finalModelHash,
            transcriptRoot_,
            rounds,
            trainerCount,
            roundDigests
        );
    }

    /// @notice True when `receipt` is well formed: version 1, R >= 1 and length exactly 189 + 32 R.
    function isWellFormed(bytes memory receipt) internal pure returns (bool) {
        uint256 len = receipt.length;
        if (len < HEADER_LENGTH + 32) return false;
        if (uint8(receipt[0]) != VERSION) return false;
        uint256 r = _u32At(receipt, OFF_ROUNDS);
        // r < 2**32, so the product cannot overflow.
        return r != 0 && len == HEADER_LENGTH + 32 * r;
    }

    /// @notice Decodes the 189-byte header of a well-formed receipt.
    /// @dev Reverts with RunRootMalformedReceipt when `isWellFormed(receipt)` is false.
    function header(bytes memory receipt) internal pure returns (Header memory h) {
        if (!isWellFormed(receipt)) revert RunRootMalformedReceipt(receipt.length);
        h.version = uint8(receipt[0]);
        h.chainId = uint256(_wordAt(receipt, OFF_CHAIN_ID));
        h.registry = address(bytes20(_wordAt(receipt, OFF_REGISTRY)));
        h.taskId = _wordAt(receipt, OFF_TASK_ID);
        h.specHash = _wordAt(receipt, OFF_SPEC_HASH);
        h.finalModelHash = _wordAt(receipt, OFF_FINAL_MODEL);
        h.transcriptRoot = _wordAt(receipt, OFF_TRANSCRIPT_ROOT);
        h.rounds = uint32(_u32At(receipt, OFF_ROUNDS));
        h.trainerCount = uint32(_u32At(receipt, OFF_TRAINERS));
    }

    /// @notice Run root of a serialized receipt (without the claimed root).
    /// @dev Reverts with RunRootMalformedReceipt when `isWellFormed(receipt)` is false.
    /// Cost: (R + 1) leaf hashes and R inner-node hashes of the 0x02 precompile.
    /// @return Merkle root over sha256(DOMAIN || 0x00 || header189) and
    /// sha256(DOMAIN || 0x00 || uint32(r) || roundDigest_r), r = 0..R-1.
    function runRoot(bytes memory receipt) internal pure returns (bytes32) {
        if (!isWellFormed(receipt)) revert RunRootMalformedReceipt(receipt.length);
        uint256 r = _u32At(receipt, OFF_ROUNDS);
        bytes32[] memory leaves = new bytes32[](r + 1);

        // leaf_0 over DOMAIN || 0x00 || header189 (214 bytes).
        bytes memory buf = new bytes(25 + HEADER_LENGTH);
        assembly ("memory-safe") {
            mstore(add(buf, 32), DOMAIN) // DOMAIN then 0x00 (TAG_LEAF) and zero padding
            mcopy(add(buf, 57), add(receipt, 32), 189)
        }
        leaves[0] = sha256(buf);

        // leaf_{1+i} over DOMAIN || 0x00 || uint32(i) || roundDigest_i (61 bytes), one reused buffer.
        bytes memory lb = new bytes(61);
        assembly ("memory-safe") {
            mstore(add(lb, 32), DOMAIN)
        }
        for (uint256 i = 0; i < r; ++i) {
            assembly ("memory-safe") {
                // The index word is written first; its 28 trailing zero bytes are then
                // overwritten by the digest (bytes 29..61 of the buffer).
                mstore(add(lb, 57), shl(224, i))
                mstore(add(lb, 61), mload(add(add(receipt, 221), shl(5, i))))
            }
            leaves[i + 1] = sha256(lb);
        }
        return _foldInPlace(leaves);
    }

    // ------------------------------------------------------------------ internal

    /// @dev Folds `leaves` (n >= 1) to its Merkle root, overwriting the array.
    function _foldInPlace(bytes32[] memory leaves) private pure returns (bytes32) {
        uint256 n = leaves.length;
        // DOMAIN || 0x01 || left || right (89 bytes), one reused buffer.
        bytes memory nb = new bytes(89);
        assembly ("memory-safe") {
            mstore(add(nb, 32), DOMAIN)
            mstore8(add(nb, 56), 0x01)
        }
        while (n > 1) {
            uint256 half = n >> 1;
            for (uint256 i = 0; i < half; ++i) {
                bytes32 left = leaves[2 * i];
                bytes32 right = leaves[2 * i + 1];
                assembly ("memory-safe") {
                    mstore(add(nb, 57), left)
                    mstore(add(nb, 89), right)
                }
                leaves[i] = sha256(nb);
            }
            if (n & 1 == 1) {
                // odd last node is carried up unchanged
                leaves[half] = leaves[n - 1];
                n = half + 1;
            } else {
                n = half;
            }
        }
        return leaves[0];
    }

    /// @dev The 32 bytes of `b` starting at byte `off` (caller guarantees off + 32 <= b.length).
    function _wordAt(bytes memory b, uint256 off) private pure returns (bytes32 w) {
        assembly ("memory-safe") {
            w := mload(add(add(b, 32), off))
        }
    }

    /// @dev The big-endian uint32 at byte `off` of `b` (caller guarantees off + 4 <= b.length).
    function _u32At(bytes memory b, uint256 off) private pure returns (uint256 v) {
        assembly ("memory-safe") {
            v := shr(224, mload(add(add(b, 32), off)))
        }
    }
}
