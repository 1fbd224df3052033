// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {ITrainingRegistryTypes} from "./ITrainingRegistryTypes.sol";

/// @title ITrainingRegistryViews
/// @notice Read views of runs and trainers served at the registry's address by RegistryRounds
/// (through the registry's fallback), kept out of the registry's own code to leave it room under
/// EIP-170. Nothing here writes state.
interface ITrainingRegistryViews is ITrainingRegistryTypes {
    /// @notice Task ids in posting order, paged. @return taskIds page, total number of runs
    function listRuns(uint256 offset, uint256 limit) external view returns (bytes32[] memory taskIds, uint256 total);
    /// @notice One trainer of a run: index, enrollment, stake and slashes (atto-units), DID and the
    /// open round's on-chain (forced) submissions. Its credits live in the run's credits root
    /// (each round's RoundCommitted; claim pays them after the seal). Reverts Registry__UnknownTask.
    function trainerMetrics(bytes32 taskId, address trainer) external view returns (TrainerMetrics memory);
    /// @notice Fragment bitmaps of one trainer's forced (on-chain) submissions in one round (bit f =
    /// fragment f): submitted holds every one (rejected ones included), rejected those proven
    /// invalid or unavailable. A committed round's accepted set is in its bitmaps, behind its
    /// fragments root (proveBitmap opens them).
    function submissionsOf(bytes32 taskId, uint32 round, address trainer)
        external
        view
        returns (uint256 submitted, uint256 rejected);
    /// @notice A syncer candidate's draw weight (PROTOCOL.md §3): `weight` counts in elections
    /// requested after its last change (atto-units; 0 when it is leaving or not a candidate), and
    /// its weight may change again (a top-up, an exit, a displacement) from block
    /// `changeableFromBlock` (0: now).
    function syncerWeight(address account) external view returns (uint256 weight, uint256 changeableFromBlock);
}
