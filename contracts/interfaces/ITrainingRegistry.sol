// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

/// @title ITrainingRegistry
/// @notice Task escrow, stakes, rounds with quorum and grace window, slashing,
/// rewards and sealed receipts of Tenzro Train runs (see ../shared/DESIGN.md and
/// contracts/RECEIPT.md for the receipt / run-root encoding v1).
/// @dev Units: every token amount is in token atto-units (18 decimals, e.g. TNZO
/// wei); times are unix seconds unless a name ends in `Ms`; rounds are numbered
/// 0 .. maxRounds-1; fragments 0 .. F-1; trainer indices 0 .. enrolled-1.
///
/// Lifecycle (status): None -> Enrolling (postTask) -> Training (M trainers
/// enrolled, or the syncer closes enrollment with >= K) -> Completed (last
/// round finalized) -> Sealed (seal). A sponsor may cancel while Enrolling
/// (-> Cancelled: pool and stakes refunded).
///
/// Submission state per (task, round, trainer, fragment) is two bits:
/// 0 none, 1 submitted, 2 rejected (reported invalid by the syncer),
/// 3 accepted (by finalizeRound).
interface ITrainingRegistry {
    // ----------------------------------------------------------------- types

    /// @notice Run status.
    enum RunStatus {
        None, // 0: no such task
        Enrolling, // 1: posted, trainers enrolling
        Training, // 2: rounds running
        Completed, // 3: last round finalized, waiting for seal
        Sealed, // 4: receipt stored, payouts credited
        Cancelled // 5: cancelled during enrollment, refunds credited
    }

    /// @notice Aggregation rules of the spec (stored, enforced off-chain by the syncer).
    enum AggregationRule {
        Mean,
        TrimmedMean,
        CoordinateMedian,
        Krum
    }

    /// @notice Why a trainer was slashed.
    enum SlashReason {
        MissedRounds, // evicted after more than maxMisses consecutive missed rounds
        HashMismatch, // payload bytes at the CID do not hash to the posted payloadHash
        Malformed, // wrong shape / dtype / not a safetensors payload
        NonFinite, // NaN or Inf in the payload
        NormOutlier // payload norm beyond the validation bound
    }

    /// @notice Input of postTask: the spec fields the contract enforces.
    struct TaskParams {
        bytes32 taskId; // keccak256 of the spec's UTF-8 task_id (or a 0x-hex32 id)
        bytes32 specHash; // sha256 of the canonical spec JSON bytes
        string specCid; // IPFS CID of the spec JSON
        bytes32 initialWeightsRoot; // RunRoot.weightsRoot of the round-0 input weights
        uint16 trainerCount; // M, 1 .. MAX_TRAINERS
        uint16 quorum; // K, 1 .. M: accepted submissions per fragment needed before the deadline
        uint16 fragmentCount; // F, 1 .. MAX_FRAGMENTS
        uint32 innerSteps; // H (> 0), informational for trainers
        uint32 maxRounds; // R, 1 .. MAX_ROUNDS
        uint64 graceWindowMs; // tau in milliseconds (> 0); stored rounded UP to whole seconds
        uint8 aggregation; // AggregationRule
        uint8 tier; // only 0 = Open is supported
        uint8 maxMisses; // evicted when consecutive missed rounds exceed this
        uint256 minStake; // minimum trainer stake, token atto-units (> 0)
        uint256 rewardPool; // escrowed reward pool, token atto-units (may be 0)
        uint64[] fragmentSizes; // F entries: parameter count of each fragment (> 0), reward weights
    }

    /// @notice Input of finalizeRound.
    struct RoundCommit {
        bytes32 taskId;
        uint32 round; // must be the open round
        bytes32[] fragmentHashes; // F entries: sha256 of the new global safetensors of each fragment
        string[] fragmentCids; // F entries: IPFS CIDs of those bytes
        uint256[] acceptedBitmaps; // one per enrolled trainer index: bit f set = fragment f accepted
        bytes32 transcriptHash; // sha256 of the round's canonical transcript JSON bytes
        string transcriptCid; // IPFS CID of the transcript JSON
    }

    /// @notice Everything an operator needs about a run (getRun).
    struct RunView {
        bytes32 taskId;
        RunStatus status;
        address sponsor;
        address syncer; // address(0) until elected
        bytes32 specHash;
        string specCid;
        bytes32 initialWeightsRoot;
        bytes32 weightsRoot; // weights root of the open round's input (initial, then last finalized)
        uint16 trainerCount; // M
        uint16 quorum; // K
        uint16 fragmentCount; // F
        uint16 enrolledCount;
        uint16 activeCount; // enrolled and not evicted
        uint32 innerSteps; // H
        uint32 maxRounds;
        uint32 graceWindowSeconds;
        uint8 aggregation;
        uint8 tier;
        uint8 maxMisses;
        uint32 currentRound; // open round (Training), maxRounds after the last finalize
        uint64 roundOpenedAt; // seconds
        uint64 roundDeadline; // seconds: roundOpenedAt + graceWindowSeconds
        uint64 syncerReplaceableAt; // seconds: roundDeadline + syncerTimeout (0 if not Training)
        uint64 postedAt; // seconds
        uint256 minStake;
        uint256 rewardPool; // as escrowed at postTask
        uint256 rewardPoolLeft; // reward pool + slashed stake, not yet credited to anyone
        uint256 stakeHeld; // trainer stakes held for this run (after slashing)
        uint256 totalCredits; // sum of fragment-size-weighted accepted submissions
        uint64[] fragmentSizes;
    }

    /// @notice Stored per finalized round.
    struct RoundRecord {
        bytes32 weightsRoot; // weights after this round
        bytes32 transcriptHash;
        bytes32 roundDigest; // RunRoot.roundDigest(round, weightsRoot, transcriptHash, acceptedCount)
        uint32 acceptedCount; // accepted (trainer, fragment) pairs
        uint64 finalizedAt; // seconds
    }

    /// @notice Per-trainer metrics (trainerMetrics).
    struct TrainerMetrics {
        address trainer;
        uint16 index; // also the data shard index (shard i of M)
        bool enrolled;
        bool evicted;
        uint32 submitted; // submissions so far, including the open round
        uint32 accepted; // accepted (fragment) submissions
        uint32 missedRounds; // current run of consecutive missed rounds
        uint32 totalMissed; // all missed rounds
        uint256 stake; // staked at enrollment, atto-units
        uint256 slashed; // slashed so far, atto-units
        uint256 credits; // fragment-size-weighted accepted submissions
        uint256 currentReward; // rewardPoolLeft * credits / totalCredits (final after seal), atto-units
        string did;
    }

    /// @notice Sealed receipt (getReceipt). serialized = RunRoot.encodeReceipt(...).
    struct TrainingReceipt {
        bytes32 taskId;
        bytes32 specHash;
        bytes32 finalModelHash; // weights root after the last round
        bytes32 runRoot;
        bytes32 transcriptRoot;
        uint32 rounds;
        uint32 trainerCount; // trainers ever enrolled
        uint256 chainId;
        address registry;
        uint64 sealedAt; // seconds
    }

    // ---------------------------------------------------------------- events

    /// @notice A syncer candidate added stake (stake = amount added, totalStake after).
    event SyncerRegistered(address indexed syncer, uint256 stake, uint256 totalStake);
    /// @notice A syncer candidate left the pool; its stake is now withdrawable.
    event SyncerUnregistered(address indexed syncer, uint256 stakeReleased);
    /// @notice A task was posted and its reward pool escrowed.
    event TaskPosted(bytes32 indexed taskId, address indexed sponsor, TaskParams params, uint32 graceWindowSeconds);
    /// @notice A syncer was elected (previous = address(0) for the first election,
    /// else the replaced syncer, whose stake was slashed by previousSlashed).
    event SyncerElected(
        bytes32 indexed taskId,
        address indexed syncer,
        address indexed previous,
        uint32 round,
        uint256 syncerStake,
        uint256 previousSlashed
    );
    /// @notice A trainer enrolled; it trains on data shard `shard` of `shardCount`.
    event TrainerEnrolled(
        bytes32 indexed taskId, address indexed trainer, uint16 index, uint16 shard, uint16 shardCount, uint256 stake, string did
    );
    /// @notice Round `round` opened: trainers start from `weightsRoot`, submit before `deadline` (seconds).
    event RoundOpened(bytes32 indexed taskId, uint32 indexed round, bytes32 weightsRoot, uint64 openedAt, uint64 deadline);
    /// @notice An outer gradient was submitted (cid and payloadHash live only in this event).
    event GradientSubmitted(
        bytes32 indexed taskId, uint32 indexed round, uint16 fragment, address indexed trainer, string cid, bytes32 payloadHash
    );
    /// @notice Round finalized: new weights (CIDs + hashes), accepted set, transcript.
    event RoundFinalized(
        bytes32 indexed taskId,
        uint32 indexed round,
        bytes32 weightsRoot,
        uint32 acceptedCount,
        bool quorumMet,
        RoundCommit commit
    );
    /// @notice A trainer was slashed `amount` atto-units (moved to the run's reward pool).
    event TrainerSlashed(
        bytes32 indexed taskId,
        address indexed trainer,
        SlashReason reason,
        uint32 round,
        uint16 fragment,
        uint256 amount,
        uint256 stakeLeft
    );
    /// @notice A trainer was evicted after `consecutiveMisses` missed rounds; it can no longer submit.
    event TrainerEvicted(bytes32 indexed taskId, address indexed trainer, uint32 round, uint32 consecutiveMisses);
    /// @notice The run was sealed and its receipt stored.
    event RunSealed(
        bytes32 indexed taskId,
        bytes32 runRoot,
        bytes32 finalModelHash,
        bytes32 transcriptRoot,
        uint32 rounds,
        uint32 trainerCount,
        uint256 rewardsCredited,
        uint256 dustToSponsor
    );
    /// @notice A payout (reward + stake refund) was credited to `account`'s withdrawable balance.
    event PayoutCredited(bytes32 indexed taskId, address indexed account, uint256 reward, uint256 stakeRefund);
    /// @notice The sponsor cancelled a task during enrollment; pool and stakes were credited back.
    event TaskCancelled(bytes32 indexed taskId, uint256 poolRefunded, uint16 trainersRefunded);
    /// @notice `account` withdrew `amount` atto-units.
    event Withdrawn(address indexed account, uint256 amount);

    // ---------------------------------------------------------------- errors

    error Registry__ZeroAddress();
    error Registry__ZeroAmount();
    error Registry__TransferShortfall(uint256 expected, uint256 received);
    error Registry__TaskExists(bytes32 taskId);
    error Registry__UnknownTask(bytes32 taskId);
    error Registry__ZeroTaskId();
    error Registry__ZeroTrainers();
    error Registry__TooManyTrainers(uint16 m, uint16 max);
    error Registry__ZeroQuorum();
    error Registry__QuorumExceedsTrainers(uint16 k, uint16 m);
    error Registry__ZeroFragments();
    error Registry__TooManyFragments(uint16 f, uint16 max);
    error Registry__FragmentSizesLength(uint256 given, uint16 f);
    error Registry__ZeroFragmentSize(uint16 fragment);
    error Registry__ZeroMaxRounds();
    error Registry__TooManyRounds(uint32 maxRounds, uint32 max);
    error Registry__ZeroInnerSteps();
    error Registry__ZeroGraceWindow();
    error Registry__GraceWindowTooLong(uint64 graceWindowMs, uint64 maxMs);
    error Registry__UnsupportedTier(uint8 tier);
    error Registry__UnknownAggregation(uint8 rule);
    error Registry__ZeroMinStake();
    error Registry__WrongStatus(bytes32 taskId, RunStatus have);
    error Registry__NotSponsor(bytes32 taskId, address caller);
    error Registry__StakeTooLow(uint256 stake, uint256 minStake);
    error Registry__EnrollmentFull(bytes32 taskId, uint16 m);
    error Registry__AlreadyEnrolled(bytes32 taskId, address trainer);
    error Registry__EmptyDid();
    error Registry__NotEnoughEnrolled(uint16 enrolled, uint16 quorum);
    error Registry__NotSyncer(bytes32 taskId, address caller);
    error Registry__SyncerStillActive(bytes32 taskId, address syncer, uint64 replaceableAt);
    error Registry__NoSyncerCandidates();
    error Registry__SyncerPoolFull(uint256 max);
    error Registry__NotSyncerCandidate(address account);
    error Registry__SyncerBusy(address syncer, uint32 activeTasks);
    error Registry__WrongRound(bytes32 taskId, uint32 given, uint32 open);
    error Registry__DeadlinePassed(bytes32 taskId, uint32 round, uint64 deadline);
    error Registry__BadFragment(uint16 fragment, uint16 fragmentCount);
    error Registry__InvalidSignature();
    error Registry__NotEnrolled(bytes32 taskId, address trainer);
    error Registry__TrainerIsEvicted(bytes32 taskId, address trainer);
    error Registry__DuplicateSubmission(bytes32 taskId, uint32 round, uint16 fragment, address trainer);
    error Registry__NoSuchSubmission(bytes32 taskId, uint32 round, uint16 fragment, address trainer);
    error Registry__UnknownReason(uint8 reason);
    error Registry__WeightsLength(uint256 hashes, uint256 cids, uint16 f);
    error Registry__AcceptedLength(uint256 given, uint16 enrolled);
    error Registry__AcceptedNotSubmitted(uint16 trainerIndex, uint256 invalidBits);
    error Registry__QuorumNotMet(uint16 fragment, uint16 accepted, uint16 quorum);
    error Registry__NothingToWithdraw(address account);

    // --------------------------------------------------------- syncer pool

    /// @notice Join the syncer candidate pool or add stake; pulls `amount` token atto-units
    /// from the caller (approve first). Eligible for election while stake >= minSyncerStake().
    /// @param amount stake to add, token atto-units (> 0)
    function registerSyncer(uint256 amount) external;

    /// @notice Leave the syncer pool; the whole stake becomes withdrawable. Reverts
    /// Registry__SyncerBusy while the caller is the syncer of an unsealed run.
    function unregisterSyncer() external;

    // ------------------------------------------------------------- lifecycle

    /// @notice Post a task and escrow its reward pool (pulls p.rewardPool atto-units from
    /// the caller, who becomes the sponsor). Status -> Enrolling.
    function postTask(TaskParams calldata p) external;

    /// @notice Elect (or replace) the task's syncer: stake-weighted pseudo-random pick among
    /// eligible candidates. Anyone may call: once when no syncer is set (Enrolling or Training),
    /// or to replace a syncer that has not finalized the open round by
    /// roundDeadline + syncerTimeout() seconds (the old syncer is slashed SYNCER_SLASH_BPS of
    /// its stake into the run's reward pool and is excluded from this draw).
    /// @return syncer the elected address
    function electSyncer(bytes32 taskId) external returns (address syncer);

    /// @notice Enroll the caller as a trainer with `stake` atto-units (>= minStake, pulled from
    /// the caller). Trainer index i trains data shard i of M. The M-th enrollment opens round 0.
    function enrollTrainer(bytes32 taskId, uint256 stake, string calldata did) external;

    /// @notice The syncer opens round 0 with fewer than M (but >= K) enrolled trainers.
    function closeEnrollment(bytes32 taskId) external;

    /// @notice The sponsor cancels a task still Enrolling: the reward pool and all stakes are
    /// credited back (withdraw to collect).
    function cancelTask(bytes32 taskId) external;

    /// @notice Submit an outer gradient for (round, fragment) on a trainer's behalf; the trainer
    /// is recovered from its EIP-712 signature over
    /// OuterGradient(bytes32 taskId,uint32 round,uint16 fragment,string cid,bytes32 payloadHash)
    /// (domain "TenzroTrainingRegistry", version "1"), so anyone may relay it. Only the open round,
    /// only until roundDeadline (inclusive, seconds), once per (trainer, round, fragment).
    /// @param payloadHash sha256 of the payload bytes pinned at `cid`
    /// @param signature 65-byte (r, s, v) ECDSA signature of the trainer
    function submitOuterGradient(
        bytes32 taskId,
        uint32 round,
        uint16 fragment,
        string calldata cid,
        bytes32 payloadHash,
        bytes calldata signature
    ) external;

    /// @notice The syncer reports a submission of the open round as invalid; the trainer is
    /// slashed INVALID_SLASH_BPS of its remaining stake (into the run's reward pool) and the
    /// submission can no longer be accepted. Trust: the syncer's word, checkable by anyone
    /// replaying the payload at the CID of GradientSubmitted against the round transcript.
    /// @param reason a SlashReason other than MissedRounds (1..4)
    function reportInvalid(bytes32 taskId, uint32 round, uint16 fragment, address trainer, uint8 reason) external;

    /// @notice The syncer commits the open round. Before roundDeadline every fragment needs
    /// >= K accepted submissions; after it, any accepted set (even empty) is allowed.
    /// Credits each accepted bit with its fragment size, counts misses (a non-evicted trainer
    /// with no accepted bit in the round), evicts and slashes past maxMisses, then opens the next
    /// round or, after the last one, moves to Completed.
    function finalizeRound(RoundCommit calldata c) external;

    /// @notice Seal a Completed run (anyone may call): stores the receipt and credits rewards
    /// pro rata to credits, stake refunds minus slashing, and the integer-division dust (or the
    /// whole pool when nobody earned credit) to the sponsor.
    function seal(bytes32 taskId) external;

    /// @notice Pull everything credited to the caller (rewards, refunds, released syncer stake).
    /// @return amount token atto-units transferred
    function withdraw() external returns (uint256 amount);

    // ----------------------------------------------------------------- views

    /// @notice The ERC-20 of stakes and rewards.
    function token() external view returns (address);
    /// @notice Minimum syncer stake for election, token atto-units.
    function minSyncerStake() external view returns (uint256);
    /// @notice Seconds after a round deadline before a silent syncer may be replaced.
    function syncerTimeout() external view returns (uint32);
    /// @notice EIP-712 digest a trainer signs for submitOuterGradient.
    function outerGradientDigest(bytes32 taskId, uint32 round, uint16 fragment, string calldata cid, bytes32 payloadHash)
        external
        view
        returns (bytes32);

    function getRun(bytes32 taskId) external view returns (RunView memory);
    /// @notice Task ids in posting order, paged. @return taskIds page, total number of runs
    function listRuns(uint256 offset, uint256 limit) external view returns (bytes32[] memory taskIds, uint256 total);
    /// @notice Receipt of a Sealed run and its serialized bytes (the verifier input minus the root).
    function getReceipt(bytes32 taskId) external view returns (TrainingReceipt memory receipt, bytes memory serialized);
    /// @notice The run root sealed for `taskId`, or bytes32(0) when the run is unknown or not
    /// Sealed yet. Never reverts: the cheap check for a dApp that anchors a payout to a receipt
    /// (RewardEscrow), about 35k gas less than reading it through getReceipt.
    function sealedRunRoot(bytes32 taskId) external view returns (bytes32);
    function getRound(bytes32 taskId, uint32 round) external view returns (RoundRecord memory);
    function trainerMetrics(bytes32 taskId, address trainer) external view returns (TrainerMetrics memory);
    /// @notice Trainers in enrollment order (index i = shard i).
    function trainersOf(bytes32 taskId) external view returns (address[] memory);
    /// @notice Fragment bitmaps of one trainer in one round (bit f = fragment f): submitted holds
    /// every submitted fragment (including rejected and accepted ones), rejected those reported
    /// invalid, accepted those accepted by finalizeRound.
    function submissionsOf(bytes32 taskId, uint32 round, address trainer)
        external
        view
        returns (uint256 submitted, uint256 rejected, uint256 accepted);
    /// @notice Token atto-units `account` can withdraw now.
    function withdrawable(address account) external view returns (uint256);
    /// @notice Syncer pool entry of `account`.
    function syncerInfo(address account) external view returns (uint256 stake, uint32 activeTasks, bool registered);
    /// @notice Registered syncer candidates.
    function syncerCandidates() external view returns (address[] memory);
}
