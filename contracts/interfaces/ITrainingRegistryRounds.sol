// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {ITrainingRegistryTypes} from "./ITrainingRegistryTypes.sol";

/// @title ITrainingRegistryRounds
/// @notice Rounds committed by root (contracts/PROTOCOL.md §5), served at the registry's address
/// (the registry delegatecalls them to RegistryRounds). A run opts in before its first enrollment;
/// then each round is one `commitRound` transaction whatever M and F (trainers deliver signed
/// submissions to the syncer off-chain), rewards are claimed one trainer at a time against the
/// final cumulative credits root, and the unclaimed rest goes back to the sponsor after
/// CLAIM_SECONDS.
/// @dev Units: token atto-units, unix seconds. Trees are §6's positional trees (keccak256 of
/// left ‖ right, empty positions bytes32(0), width nextPow2(max(1, n))).
interface ITrainingRegistryRounds is ITrainingRegistryTypes {
    /// @notice Input of commitRound.
    struct RootCommit {
        bytes32 taskId;
        uint32 round; // must be the open round
        bytes32 fragmentsRoot; // §6: positional tree over nextPow2(F) fragment leaves
        bytes32 creditsRoot; // cumulative credits after this round, positional tree over nextPow2(M) leaves
        uint256 totalCredits; // cumulative: previous total + sum over f of fragmentSizes[f] * counts[f]
        uint16[] counts; // F entries: accepted submissions per fragment (<= enrolled trainers)
        bytes32[] fragmentHashes; // F entries: sha256 of the new global safetensors of each fragment
        string[] fragmentCids; // F entries: IPFS CIDs of those bytes (event only)
        bytes32 transcriptHash; // sha256 of the round's canonical transcript JSON bytes
        string transcriptCid; // IPFS CID of the transcript JSON (event only)
    }

    /// @notice The sponsor switched the run to the root flow, with the §6 initial fragments root.
    event RootFlowEnabled(bytes32 indexed taskId, bytes32 initialFragmentsRoot);
    /// @notice The syncer committed a round by root; `weightsRoot` is the receipt's (RunRoot over
    /// the fragments' sha256; getRound leaves it 0 for a root-flow round, its roundDigest binds
    /// it), `commitment` the word stored for the round.
    event RoundCommitted(
        bytes32 indexed taskId, uint32 indexed round, bytes32 weightsRoot, bytes32 commitment, RootCommit commit
    );
    /// @notice A root-flow run was sealed: stakes refunded, `claimable` atto-units open to claims
    /// until `claimDeadline` (seconds).
    event RootRunSealed(bytes32 indexed taskId, uint256 claimable, uint64 claimDeadline);
    /// @notice Trainer `index` claimed `reward` atto-units for `credits` cumulative credits.
    event RewardClaimed(bytes32 indexed taskId, address indexed trainer, uint16 index, uint256 credits, uint256 reward);
    /// @notice The unclaimed pool (and the rounding dust) went back to the sponsor.
    event PoolSwept(bytes32 indexed taskId, address indexed sponsor, uint256 amount);

    /// @notice useRootFlow on a run that already has trainers or is already in the root flow.
    error Registry__RootFlowLocked(bytes32 taskId);
    /// @notice A root-flow function on a run in the v1 flow.
    error Registry__NotRootFlow(bytes32 taskId);
    /// @notice counts, fragmentHashes and fragmentCids must each have F entries.
    error Registry__CommitLength(uint256 counts, uint256 hashes, uint256 cids, uint16 f);
    /// @notice A fragment's count exceeds the enrolled trainers.
    error Registry__CountTooLarge(uint16 fragment, uint16 count, uint16 enrolled);
    /// @notice totalCredits is not the previous total plus the round's sum of size * count.
    error Registry__CreditsMismatch(uint256 given, uint256 expected);
    /// @notice The last round's challenge window ends at `until` (seconds).
    error Registry__ChallengeWindowOpen(bytes32 taskId, uint64 until);
    /// @notice The credit proof does not open the final credits root at `index`.
    error Registry__BadCreditProof(uint16 index);
    /// @notice Trainer `index` already claimed.
    error Registry__AlreadyClaimed(bytes32 taskId, uint16 index);
    /// @notice A claim larger than what is left of the run's pool (credits leaves summing to more
    /// than totalCredits): the claim is refused, no other run's tokens are reachable.
    error Registry__ClaimExceedsPool(uint256 reward, uint256 left);
    /// @notice sweep before the claim deadline (seconds).
    error Registry__ClaimPeriodOpen(bytes32 taskId, uint64 deadline);

    /// @notice Switches a posted run to the root flow. Only its sponsor, while it is Enrolling and
    /// nobody has enrolled (trainers enroll knowing the flow). `initialFragmentsRoot` is §6's
    /// initial state (weights commitments, zero momentum), the base of round 0's fraud proofs.
    /// Reverts Registry__NotSponsor, Registry__WrongStatus, Registry__RootFlowLocked.
    function useRootFlow(bytes32 taskId, bytes32 initialFragmentsRoot) external;

    /// @notice The elected syncer commits the open round by root: O(1) storage whatever M and F
    /// (PROTOCOL.md §5). Before the deadline every counts[f] must reach the quorum K; after it any
    /// counts are accepted. Accrues one syncer fee; opens the next round or completes the run.
    /// Reverts Registry__NotRootFlow, Registry__NotSyncer, Registry__WrongRound,
    /// Registry__CommitLength, Registry__CountTooLarge, Registry__QuorumNotMet,
    /// Registry__CreditsMismatch.
    function commitRound(RootCommit calldata c) external;

    /// @notice Seals a Completed root-flow run once the last round's challenge window
    /// (challengeSeconds after its commit) has passed and no challenge is pending: stores the
    /// receipt (as `seal`), refunds every trainer's stake minus its slashes (withdrawable), opens
    /// claims until now + CLAIM_SECONDS. With no credits at all the pool goes back to the sponsor.
    /// Anyone may call it. Reverts Registry__ChallengeWindowOpen, Registry__ChallengesPending.
    function sealRootRun(bytes32 taskId) external;

    /// @notice Credits trainer `index` with floor(claimable * credits / totalCredits) atto-units
    /// (withdrawable), once; `credits` and `proof` open the final creditsRoot at `index`, leaf
    /// keccak256(0x04 ‖ uint16 index ‖ address trainer ‖ uint256 credits). Anyone may call it
    /// for any trainer; the reward always goes to the trainer. Reverts Registry__BadCreditProof,
    /// Registry__AlreadyClaimed, Registry__ClaimExceedsPool, Registry__WrongStatus.
    function claim(bytes32 taskId, uint16 index, uint256 credits, bytes32[] calldata proof) external;

    /// @notice After the claim deadline, credits what is left of the pool to the sponsor
    /// (withdrawable); anyone may call it. Reverts Registry__ClaimPeriodOpen.
    function sweep(bytes32 taskId) external;

    /// @notice Root-flow state: whether the run is in it, the initial and latest fragments roots,
    /// the latest cumulative credits root and the claim deadline (seconds; 0 before the seal).
    function rootState(bytes32 taskId)
        external
        view
        returns (
            bool enabled,
            bytes32 initialFragmentsRoot,
            bytes32 fragmentsRoot,
            bytes32 creditsRoot,
            uint64 claimDeadline
        );

    /// @notice The word stored for root-flow round `round` (bytes32(0) if not committed).
    function roundCommitment(bytes32 taskId, uint32 round) external view returns (bytes32);

    /// @notice Whether trainer `index` has claimed.
    function claimed(bytes32 taskId, uint16 index) external view returns (bool);
}
