// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {ITrainingRegistryTypes} from "./ITrainingRegistryTypes.sol";

/// @title ITrainingRegistryPermit
/// @notice postTask and enrollTrainer in one transaction with an ERC-2612 permit of the token
/// instead of a prior approve, so no allowance is left behind. Served at the registry's address
/// (TrainingRegistry delegatecalls them to RegistryEvidence); `ITrainingRegistryFull` is the
/// registry's whole ABI.
/// @dev The permit is for (owner = caller, spender = the registry, value = the amount pulled,
/// deadline) under the token's EIP-712 domain (its `eip712Domain()`), at its `nonces(caller)`.
/// It is tried, not required: a permit that reverts (already used, e.g. copied from the mempool
/// and sent first by someone else; expired; a token without permit) is ignored, and the call
/// goes on when the caller's allowance covers the amount anyway (the front-run permit set it),
/// else reverts Registry__AllowanceTooLow. Units: token atto-units, unix seconds.
interface ITrainingRegistryPermit is ITrainingRegistryTypes {
    /// @notice postTask (ITrainingRegistry) authorizing the pull of p.rewardPool atto-units with a
    /// permit signed by the caller, the sponsor.
    /// @param p the task, as for postTask
    /// @param deadline last unix second the permit is valid (inclusive)
    /// @param v signature recovery id (27 or 28)
    /// @param r signature r
    /// @param s signature s
    function postTaskWithPermit(TaskParams calldata p, uint256 deadline, uint8 v, bytes32 r, bytes32 s) external;

    /// @notice enrollTrainer (ITrainingRegistry) authorizing the pull of `stake` atto-units with a
    /// permit signed by the caller, the trainer.
    /// @param taskId the run
    /// @param stake stake, token atto-units (>= the run's minStake)
    /// @param did the trainer's DID (non-empty)
    /// @param deadline last unix second the permit is valid (inclusive)
    /// @param v signature recovery id (27 or 28)
    /// @param r signature r
    /// @param s signature s
    function enrollTrainerWithPermit(
        bytes32 taskId,
        uint256 stake,
        string calldata did,
        uint256 deadline,
        uint8 v,
        bytes32 r,
        bytes32 s
    ) external;
}
