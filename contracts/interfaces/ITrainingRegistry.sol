// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {ITrainingRegistryTypes} from "./ITrainingRegistryTypes.sol";

/// @title ITrainingRegistry
/// @notice Task escrow, stakes, rounds with quorum and grace window, slashing,
/// rewards and sealed receipts of Tenzro Train runs (see ../shared/DESIGN.md and
/// contracts/RECEIPT.md for the receipt / run-root encoding v1).
/// @dev Units: every token amount is in token atto-units (18 decimals, e.g. TNZO
/// wei); times are unix seconds unless a name ends in `Ms`; rounds are numbered
/// 0 .. maxRounds-1; fragments 0 .. F-1; trainer indices 0 .. enrolled-1.
///
/// Lifecycle (status): None -> Enrolling (postTask; the sponsor then commits the initial
/// fragments root and outer rule with useRootFlow, before which nobody may enroll) -> Training
/// (M trainers enrolled, or anyone closes enrollment after the enrollment deadline with >= K)
/// -> Completed (last round committed) -> Sealed (sealRootRun, after the last round's challenge
/// window). The sponsor may cancel while Enrolling; anyone may cancel once the enrollment
/// deadline has passed with fewer than K enrolled (-> Cancelled: pool and stakes refunded).
///
/// Syncers (contracts/PROTOCOL.md, contracts/THREATS.md): a candidate registers with
/// at least minSyncerStake(); a syncer is elected only for a Training run, in two
/// steps (requestSyncerElection at block n, electSyncer from block n+1 with
/// blockhash(n)), and locks the run's syncerBond out of its stake while rounds it committed
/// can still be proven. It becomes replaceable syncerTimeout() seconds after the later of the
/// round deadline and its own election; replacing it burns its bond for that run, once. Each
/// committed round accrues rewardPool * syncerFeeBps / 10000 / maxRounds to its committer,
/// claimable after the seal, and comes back to the pool when a proof discards the round.
/// Slashed stake is burned (kept by the registry for ever), never paid to the sponsor or to
/// another party but a prover's bounty.
///
/// Rounds (contracts/PROTOCOL.md §5) are committed by root (ITrainingRegistryRounds
/// .commitRound); trainers deliver payloads off-chain and force one on-chain only when left
/// out (ITrainingRegistryEvidence.commitSubmission, then submitOuterGradient). An on-chain
/// submission's state per (task, round opening, trainer, fragment) is two bits: 0 none,
/// 1 submitted, 2 rejected (proven invalid or unavailable, with evidence the contract checked:
/// proveInvalid, proveNormOutlier, expireAvailability), 3 accepted.
///
/// Evidence (contracts/PROTOCOL.md §4): a submission commits the trainer's pseudo-gradient
/// as a chunk-Merkle root with its binary32 sum of squares (§2) and is signed over the
/// weights root the round started from. Nobody is slashed on anyone's word: a non-finite
/// value or bad padding is shown by opening one chunk, a norm outlier against the signed sums
/// of squares the previous round accepted, an unavailable payload by a challenge the
/// trainer did not answer in time. The prover of a slash gets BOUNTY_BPS of it; the rest is
/// burned.
interface ITrainingRegistry is ITrainingRegistryTypes {
    // --------------------------------------------------------- syncer pool

    /// @notice Join the syncer candidate pool or add stake; pulls `amount` token atto-units
    /// from the caller (approve first). A first registration needs amount >= minSyncerStake().
    /// The new stake weighs in elections requested from the next block on; those requested
    /// before weigh the candidate as it was, and a second change of its weight (a top-up, an
    /// exit) is refused with Registry__SyncerChangePending until ELECTION_WINDOW_BLOCKS after
    /// the first, so no open draw can be steered (PROTOCOL.md §4). When MAX_SYNCER_CANDIDATES
    /// candidates weigh, a newcomer with more stake than the smallest idle candidate makes that
    /// candidate leave (SyncerLeaving; its stake becomes withdrawable once its exit takes
    /// effect); otherwise Registry__SyncerPoolFull. So a squatter must out-stake every candidate
    /// it keeps out.
    /// @param amount stake to add, token atto-units (> 0)
    function registerSyncer(uint256 amount) external;

    /// @notice Leave the syncer pool, in two calls: the first makes the caller weigh 0 in
    /// elections requested from now on (SyncerLeaving); the second, from ELECTION_WINDOW_BLOCKS
    /// + 1 blocks later, makes its whole stake withdrawable (SyncerUnregistered). Reverts
    /// Registry__SyncerBusy while the caller is the syncer of an unsealed run (an election
    /// requested before its exit may still pick it), Registry__SyncerChangePending before its
    /// exit has taken effect or while a previous change is pending.
    function unregisterSyncer() external;

    // ------------------------------------------------------------- lifecycle

    /// @notice Post a task and escrow its reward pool (pulls p.rewardPool atto-units from
    /// the caller, who becomes the sponsor). Status -> Enrolling.
    function postTask(TaskParams calldata p) external;

    /// @notice Step 1 of an election (anyone): records the current block, whose hash (unknown
    /// inside this transaction) seeds the draw. Only for a Training run without a syncer, or
    /// whose syncer is replaceable (syncerReplaceableAt passed). Reverts
    /// Registry__ElectionPending while an earlier request can still be resolved.
    function requestSyncerElection(bytes32 taskId) external;

    /// @notice Step 2 (anyone, from the block after the request, within 256 blocks): elect (or
    /// replace) the syncer by a stake-weighted draw seeded with blockhash(request block) among
    /// candidates with stake >= minSyncerStake() whose unlocked stake covers the run's
    /// syncerBond, excluding the replaced syncer. The replaced syncer's bond for this run is
    /// burned. The new syncer locks syncerBond until the seal.
    /// @return syncer the elected address
    function electSyncer(bytes32 taskId) external returns (address syncer);

    /// @notice Enroll the caller as a trainer with `stake` atto-units (>= minStake, pulled from
    /// the caller). Trainer index i trains data shard i of M. The M-th enrollment opens round 0.
    function enrollTrainer(bytes32 taskId, uint256 stake, string calldata did) external;

    /// @notice Tier 1 (Allowlist) runs: the sponsor allows `trainers` to enroll (adding to the
    /// list; repeatable while the run is Enrolling). Until then nobody can, so the list is in place
    /// before any enrollment and cannot be front-run. Reverts Registry__NotSponsor for any other
    /// caller, Registry__WrongStatus after enrollment, Registry__UnsupportedTier on an Open run.
    /// Emits TrainerAllowed per address.
    function allowTrainers(bytes32 taskId, address[] calldata trainers) external;

    /// @notice Anyone opens round 0 with fewer than M (but >= K) enrolled trainers once the
    /// enrollment deadline has passed.
    function closeEnrollment(bytes32 taskId) external;

    /// @notice After the seal (or a cancelStalledRun), move the caller's accrued syncer fees of `taskId` to its
    /// withdrawable balance. @return amount atto-units
    function claimSyncerFee(bytes32 taskId) external returns (uint256 amount);

    /// @notice Pull everything credited to the caller (rewards, refunds, released syncer stake).
    /// @return amount token atto-units transferred
    function withdraw() external returns (uint256 amount);

    // ----------------------------------------------------------------- views

    /// @notice The ERC-20 of stakes and rewards.
    function token() external view returns (address);
    /// @notice Minimum syncer stake for election, token atto-units.
    function minSyncerStake() external view returns (uint256);
    /// @notice Seconds after the later of the round deadline and the syncer's election before
    /// a silent syncer may be replaced.
    function syncerTimeout() external view returns (uint32);
    /// @notice Smallest syncer pay per round a task may offer, token atto-units.
    function minSyncerFeePerRound() external view returns (uint256);
    /// @notice Token atto-units burned by slashing so far (held by the registry for ever).
    function burned() external view returns (uint256);
    /// @notice Fees accrued to `syncer` in run `taskId`, not yet claimed, atto-units.
    function syncerFeeOf(bytes32 taskId, address syncer) external view returns (uint256);
    /// @notice What an escrow checks before paying on a run: the sealed run root (0 while not
    /// Sealed), the sponsor, the spec hash and the total credits (accepted work). Never reverts.
    function runBinding(bytes32 taskId)
        external
        view
        returns (bytes32 runRoot, address sponsor, bytes32 specHash, uint256 totalCredits);
    /// @notice EIP-712 digest a trainer signs for submitOuterGradient (s.signature is ignored);
    /// `baseRoot` is the run's weightsRoot while the round is open.
    function outerGradientDigest(bytes32 taskId, uint32 round, uint16 fragment, bytes32 baseRoot, SignedPayload calldata s)
        external
        view
        returns (bytes32);
    function getRun(bytes32 taskId) external view returns (RunView memory);
    /// @notice Receipt of a Sealed run and its serialized bytes (the verifier input minus the root).
    function getReceipt(bytes32 taskId) external view returns (TrainingReceipt memory receipt, bytes memory serialized);
    /// @notice The run root sealed for `taskId`, or bytes32(0) when the run is unknown or not
    /// Sealed yet. Never reverts: the cheap check for a dApp that anchors a payout to a receipt
    /// (RewardEscrow), about 35k gas less than reading it through getReceipt.
    function sealedRunRoot(bytes32 taskId) external view returns (bytes32);
    function getRound(bytes32 taskId, uint32 round) external view returns (RoundRecord memory);
    /// @notice Trainers in enrollment order (index i = shard i).
    function trainersOf(bytes32 taskId) external view returns (address[] memory);
    /// @notice Token atto-units `account` can withdraw now.
    function withdrawable(address account) external view returns (uint256);
    /// @notice Syncer pool entry of `account`: stake and the part locked as bonds, atto-units.
    function syncerInfo(address account)
        external
        view
        returns (uint256 stake, uint32 activeTasks, bool registered, uint256 locked);
    /// @notice Registered syncer candidates.
    function syncerCandidates() external view returns (address[] memory);
}
