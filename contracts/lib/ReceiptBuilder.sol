// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {RunRoot} from "./RunRoot.sol";

/// @title ReceiptBuilder
/// @notice Stateless helper the TrainingRegistry deploys in its constructor and calls to
/// build a run's receipt with RunRoot (encoding v1, contracts/RECEIPT.md). It lives in its
/// own contract only to keep the registry's runtime code under the EIP-170 limit
/// (24,576 bytes); it holds no state and trusts no caller.
contract ReceiptBuilder {
    /// @notice Weights root and round digest of one finalized round.
    /// @param round the round number r
    /// @param fragmentHashes sha256 of each new fragment's safetensors bytes (F >= 1)
    /// @param transcriptHash sha256 of the round's canonical transcript JSON
    /// @param acceptedCount accepted (trainer, fragment) submissions of the round
    function roundRecord(uint32 round, bytes32[] calldata fragmentHashes, bytes32 transcriptHash, uint32 acceptedCount)
        external
        pure
        returns (bytes32 weightsRoot, bytes32 roundDigest)
    {
        weightsRoot = RunRoot.weightsRoot(fragmentHashes);
        roundDigest = RunRoot.roundDigest(round, weightsRoot, transcriptHash, acceptedCount);
    }

    /// @notice Serialized receipt, its transcript root and its run root.
    /// @param chainId chain id of the registry's chain
    /// @param registry the registry that sealed the run
    /// @param finalModelHash weights root after the last round
    /// @param trainerCount trainers ever enrolled in the run
    /// @param roundDigests roundDigest_0 .. roundDigest_{R-1} (R >= 1)
    /// @param transcriptHashes transcriptHash_0 .. transcriptHash_{R-1}
    /// @return serialized header189 || round digests (189 + 32 R bytes)
    /// @return transcriptRoot Merkle root over the transcript leaves
    /// @return runRoot Merkle root over the receipt leaves
    function build(
        uint256 chainId,
        address registry,
        bytes32 taskId,
        bytes32 specHash,
        bytes32 finalModelHash,
        uint32 trainerCount,
        bytes32[] calldata roundDigests,
        bytes32[] calldata transcriptHashes
    ) external pure returns (bytes memory serialized, bytes32 transcriptRoot, bytes32 runRoot) {
        transcriptRoot = RunRoot.transcriptRoot(transcriptHashes);
        serialized = RunRoot.encodeReceipt(
            chainId,
            registry,
            taskId,
            specHash,
            finalModelHash,
            transcriptRoot,
            uint32(roundDigests.length),
            trainerCount,
            roundDigests
        );
        runRoot = RunRoot.runRoot(serialized);
    }
}
