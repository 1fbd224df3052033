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
/// enrolled, or anyone closes enrollment after the enrollment deadline with >= K)
/// -> Completed (last round finalized) -> Sealed (seal). The sponsor may cancel
/// while Enrolling; anyone may cancel once the enrollment deadline has passed with
/// fewer than K enrolled (-> Cancelled: pool and stakes refunded).
///
/// Syncers (contracts/PROTOCOL.md, contracts/THREATS.md): a candidate registers with
/// at least minSyncerStake(); a syncer is elected only for a Training run, in two
/// steps (requestSyncerElection at block n, electSyncer from block n+1 with
/// blockhash(n)), and locks the run's syncerBond out of its stake until the seal. It
/// becomes replaceable syncerTimeout() seconds after the later of the round deadline
/// and its own election; replacing it burns its bond for that run, once. Each
/// finalized round accrues rewardPool * syncerFeeBps / 10000 / maxRounds to the
/// syncer that finalized it, claimable after the seal. Slashed stake is burned (kept
/// by the registry for ever), never paid to the sponsor or to another party.
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
        uint32 enrollmentSeconds; // enrollment window after posting, seconds (1 .. 30 days)
        uint16 syncerFeeBps; // share of the reward pool paid to syncers, basis points (<= MAX_SYNCER_FEE_BPS)
        uint256 syncerBond; // stake the elected syncer locks for this run, token atto-units (> 0)
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
        uint64 syncerReplaceableAt; // seconds: max(roundDeadline, syncerElectedAt) + syncerTimeout (0 if not Training)
        uint64 postedAt; // seconds
        uint256 minStake;
        uint256 rewardPool; // as escrowed at postTask
        uint256 rewardPoolLeft; // reward pool minus syncer fees accrued, not yet credited to anyone
        uint256 stakeHeld; // trainer stakes held for this run (after slashing)
        uint256 totalCredits; // sum of fragment-size-weighted accepted submissions
        uint64[] fragmentSizes;
        uint64 enrollmentDeadline; // seconds: postedAt + enrollmentSeconds
        uint64 syncerElectedAt; // seconds (0 while no syncer)
        uint64 electionBlock; // block of a pending election request (0 when none)
        uint16 syncerFeeBps;
        uint256 syncerBond; // atto-units locked by the elected syncer
        uint256 syncerFeesAccrued; // atto-units accrued to syncers so far (paid out after the seal)
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
    /// @notice Anyone asked for a syncer election at block `requestBlock`; electSyncer
    /// resolves it from the next block on with blockhash(requestBlock).
    event SyncerElectionRequested(bytes32 indexed taskId, uint32 round, uint256 requestBlock);
    /// @notice A syncer was elected (previous = address(0) for the first election,
    /// else the replaced syncer, whose bond for this run, previousSlashed atto-units, was burned).
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
    /// @notice `syncer` claimed its fees of a sealed run, `amount` atto-units (now withdrawable).
    event SyncerFeeClaimed(bytes32 indexed taskId, address indexed syncer, uint256 amount);
    /// @notice `amount` atto-units were burned (kept by the registry for ever); `from` is the
    /// slashed trainer or syncer.
    event StakeBurned(bytes32 indexed taskId, address indexed from, uint256 amount);

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
    /// @notice The rule cannot be checked coordinate by coordinate on-chain (Krum) and the tier is Open.
    error Registry__RuleNotProvable(uint8 rule, uint8 tier);
    /// @notice M * F exceeds MAX_SUBMISSION_SLOTS (bounds the gas of a round).
    error Registry__ShapeTooLarge(uint16 m, uint16 f, uint256 maxSlots);
    /// @notice enrollmentSeconds is 0 or longer than MAX_ENROLLMENT_SECONDS.
    error Registry__BadEnrollmentWindow(uint32 seconds_, uint32 max);
    /// @notice syncerFeeBps above MAX_SYNCER_FEE_BPS.
    error Registry__SyncerFeeTooHigh(uint16 bps, uint16 max);
    /// @notice The syncer's pay per round (rewardPool * syncerFeeBps / 10000 / maxRounds) is
    /// below minSyncerFeePerRound(): a run that pays its syncer nothing could lock its bond for free.
    error Registry__SyncerFeeTooLow(uint256 perRound, uint256 minPerRound);
    /// @notice syncerBond is zero.
    error Registry__ZeroSyncerBond();
    /// @notice The enrollment deadline (seconds) has not passed yet.
    error Registry__EnrollmentStillOpen(bytes32 taskId, uint64 deadline);
    /// @notice The enrollment deadline (seconds) has passed: no more enrollments.
    error Registry__EnrollmentClosed(bytes32 taskId, uint64 deadline);
    /// @notice cancelTask by a non-sponsor while >= K trainers are enrolled (the run can train).
    error Registry__RunCanTrain(bytes32 taskId, uint16 enrolled, uint16 quorum);
    /// @notice electSyncer without a pending requestSyncerElection.
    error Registry__NoElectionRequested(bytes32 taskId);
    /// @notice requestSyncerElection while a request from `requestBlock` can still be resolved.
    error Registry__ElectionPending(bytes32 taskId, uint256 requestBlock);
    /// @notice electSyncer in the block of its request: blockhash(requestBlock) is not known yet.
    error Registry__ElectionNotReady(bytes32 taskId, uint256 requestBlock);
    /// @notice electSyncer more than 256 blocks after the request: request again.
    error Registry__ElectionExpired(bytes32 taskId, uint256 requestBlock);
    /// @notice registerSyncer below minSyncerStake() on first registration.
    error Registry__SyncerStakeTooLow(uint256 stake, uint256 minStake);
    /// @notice The syncer has no fee to claim for this run.
    error Registry__NoSyncerFee(bytes32 taskId, address syncer);

    // --------------------------------------------------------- syncer pool

    /// @notice Join the syncer candidate pool or add stake; pulls `amount` token atto-units
    /// from the caller (approve first). A first registration needs amount >= minSyncerStake().
    /// When the pool holds MAX_SYNCER_CANDIDATES, a newcomer with more stake than the smallest
    /// idle candidate takes its place (that candidate's stake becomes withdrawable); otherwise
    /// Registry__SyncerPoolFull. So a squatter must out-stake every candidate it keeps out.
    /// @param amount stake to add, token atto-units (> 0)
    function registerSyncer(uint256 amount) external;

    /// @notice Leave the syncer pool; the whole stake becomes withdrawable. Reverts
    /// Registry__SyncerBusy while the caller is the syncer of an unsealed run.
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

    /// @notice Anyone opens round 0 with fewer than M (but >= K) enrolled trainers once the
    /// enrollment deadline has passed.
    function closeEnrollment(bytes32 taskId) external;

    /// @notice Cancel a task still Enrolling: the sponsor at any time, anyone once the
    /// enrollment deadline has passed with fewer than K enrolled. The reward pool and all
    /// stakes are credited back (withdraw to collect).
    function cancelTask(bytes32 taskId) external;

    /// @notice After the seal, move the caller's accrued syncer fees of `taskId` to its
    /// withdrawable balance. @return amount atto-units
    function claimSyncerFee(bytes32 taskId) external returns (uint256 amount);

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
    /// slashed INVALID_SLASH_BPS of its remaining stake (burned) and the
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
    /// @notice Syncer pool entry of `account`: stake and the part locked as bonds, atto-units.
    function syncerInfo(address account)
        external
        view
        returns (uint256 stake, uint32 activeTasks, bool registered, uint256 locked);
    /// @notice Registered syncer candidates.
    function syncerCandidates() external view returns (address[] memory);
}
