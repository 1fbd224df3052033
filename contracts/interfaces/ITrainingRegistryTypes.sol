// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

/// @title ITrainingRegistryTypes
/// @notice The types, events and errors of ITrainingRegistry (no functions), shared by the
/// registry, its evidence extension (RegistryEvidence, reached through the registry's fallback)
/// and the interface itself.
interface ITrainingRegistryTypes {
    // ----------------------------------------------------------------- types

    /// @notice Run status.
    enum RunStatus {
        None, // 0: no such task
        Enrolling, // 1: posted, trainers enrolling
        Training, // 2: rounds running
        Completed, // 3: last round committed, waiting for sealRootRun
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
        MissedRounds, // protocol v1's eviction (removed in v3: no misses are counted); kept for old logs
        HashMismatch, // payload bytes at the CID do not hash to the posted payloadHash
        Malformed, // wrong shape / dtype / not a safetensors payload
        NonFinite, // NaN or Inf in the payload
        NormOutlier, // signed sum of squares > normScreenSq x the median of the fragment's submissions
        Unavailable, // an availability challenge went unanswered within the task's challengeSeconds
        Unrevealed // a forced submission committed (commitSubmission) and never revealed (slashUnrevealed)
    }

    /// @notice A trainer's signed submission of one (round, fragment): the fields of the EIP-712
    /// OuterGradient struct besides (taskId, round, fragment, baseRoot), and the signature.
    struct SignedPayload {
        bytes32 payloadRoot; // chunk-Merkle root of the pseudo-gradient (PROTOCOL.md §2)
        uint32 payloadSumsq; // binary32 bit pattern of its squared L2 norm (the root's sum)
        string cid; // IPFS CID of the safetensors payload
        bytes32 payloadHash; // sha256 of the payload bytes
        bytes signature; // 65-byte (r, s, v) ECDSA signature of the trainer
    }

    /// @notice One opened chunk of a committed vector (PROTOCOL.md §2).
    struct ChunkOpening {
        uint32 chunkIndex; // the chunk, coordinate / 16
        bytes chunk; // its 64 bytes (16 big-endian binary32 values)
        bytes32[] siblingH; // sibling hashes, leaf level first
        uint32[] siblingS; // sibling sums of squares (binary32), same order
    }

    /// @notice A pending availability challenge against one submission.
    struct AvailabilityChallenge {
        address challenger; // address(0): none
        uint64 deadline; // seconds: the trainer answers until then (inclusive)
        uint32 chunkIndex; // the chunk it must open
        uint32 payloadSumsq; // the challenged commitment
        bytes32 payloadRoot;
        uint256 bond; // atto-units, paid to the trainer if it answers
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
        uint8 tier; // 0 = Open, 1 = Allowlist (only the sponsor's allowTrainers may enroll)
        uint256 minStake; // minimum trainer stake, token atto-units (> 0)
        uint256 rewardPool; // escrowed reward pool, token atto-units (may be 0)
        uint64[] fragmentSizes; // F entries: parameter count of each fragment (> 0), reward weights
        uint32 enrollmentSeconds; // enrollment window after posting, seconds (1 .. 30 days)
        uint16 syncerFeeBps; // share of the reward pool paid to syncers, basis points (<= MAX_SYNCER_FEE_BPS)
        uint256 syncerBond; // stake the elected syncer locks for this run, token atto-units (> 0)
        uint32 normScreenSq; // binary32 bit pattern of the norm screen squared (e.g. 100.0 for x10); 0 = none
        uint32 challengeSeconds; // how long a trainer has to answer an availability challenge, seconds (> 0)
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
        uint32 innerSteps; // H
        uint32 maxRounds;
        uint32 graceWindowSeconds;
        uint8 aggregation;
        uint8 tier;
        uint32 currentRound; // open round (Training), maxRounds after the last finalize
        uint64 roundOpenedAt; // seconds
        uint64 roundDeadline; // seconds: roundOpenedAt + graceWindowSeconds
        uint64 syncerReplaceableAt; // seconds: max(roundDeadline, syncerElectedAt, last availability answer deadline) + syncerTimeout (0 if not Training)
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
        uint32 normScreenSq;
        uint32 challengeSeconds;
        uint16 openChallenges; // availability challenges not yet answered or expired (seal waits)
    }

    /// @notice Stored per committed round.
    struct RoundRecord {
        bytes32 weightsRoot; // weights after this round
        bytes32 transcriptHash;
        bytes32 roundDigest; // RunRoot.roundDigest(round, weightsRoot, transcriptHash, acceptedCount)
        uint32 acceptedCount; // accepted (trainer, fragment) pairs
        uint64 finalizedAt; // seconds
        // root flow: 1 once a challenge of the committed round was lost (a slot challenge
        // answered), else 0; the receipt folds it into the round's digest (RunRoot.withStatus)
        uint8 challengeStatus;
        // root flow: the opening (RoundOpened's openedAt, seconds) the round was committed in:
        // its forced commitments are the ones slashUnrevealed reads
        uint64 openedAt;
    }

    /// @notice Per-trainer metrics (trainerMetrics).
    struct TrainerMetrics {
        address trainer;
        uint16 index; // also the data shard index (shard i of M)
        bool enrolled;
        uint32 submitted; // on-chain (forced) submissions of the open round
        uint256 stake; // staked at enrollment, atto-units
        uint256 slashed; // slashed so far, atto-units
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
    /// @notice The candidate weighs 0 in elections requested from now on (its exit, or its
    /// displacement by a larger newcomer); its stake leaves the pool from block `fromBlock`.
    event SyncerLeaving(address indexed syncer, uint256 fromBlock);
    /// @notice A task was posted and its reward pool escrowed.
    event TaskPosted(bytes32 indexed taskId, address indexed sponsor, TaskParams params, uint32 graceWindowSeconds);
    /// @notice A tier 1 (Allowlist) run's sponsor allowed `trainer` to enroll.
    event TrainerAllowed(bytes32 indexed taskId, address indexed trainer);
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
    /// @notice An outer gradient was submitted (the signed fields live only in this event; the
    /// signature is kept so that anyone can later prove a norm outlier with every submission's sum).
    event GradientSubmitted(
        bytes32 indexed taskId,
        uint32 indexed round,
        uint16 fragment,
        address indexed trainer,
        string cid,
        bytes32 payloadHash,
        bytes32 payloadRoot,
        uint32 payloadSumsq,
        bytes signature
    );
    /// @notice `prover` proved a submission invalid; the trainer lost `slashed` atto-units, of which
    /// `bounty` went to the prover and the rest was burned.
    event InvalidProven(
        bytes32 indexed taskId,
        address indexed trainer,
        uint32 round,
        uint16 fragment,
        SlashReason reason,
        address indexed prover,
        uint256 slashed,
        uint256 bounty
    );
    /// @notice `challenger` asked `trainer` to open chunk `chunkIndex` of its submission by `deadline` (seconds).
    event AvailabilityChallenged(
        bytes32 indexed taskId,
        address indexed trainer,
        uint32 round,
        uint16 fragment,
        address indexed challenger,
        uint32 chunkIndex,
        uint64 deadline,
        uint256 bond
    );
    /// @notice The challenged chunk was opened in time; the challenger's bond went to the trainer.
    event AvailabilityAnswered(bytes32 indexed taskId, address indexed trainer, uint32 round, uint16 fragment, bytes chunk);
    /// @notice A trainer was slashed `amount` atto-units (burned, minus a prover's bounty).
    event TrainerSlashed(
        bytes32 indexed taskId,
        address indexed trainer,
        SlashReason reason,
        uint32 round,
        uint16 fragment,
        uint256 amount,
        uint256 stakeLeft
    );
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
    /// @notice A Training run that no syncer candidate could take was cancelled after
    /// `committedRounds` committed rounds: `trainersPot` atto-units are the trainers' (by the
    /// credits of those rounds), `sponsorRefund` went back to the sponsor, `syncerBondBurned` was
    /// the silent syncer's bond.
    event StalledRunCancelled(
        bytes32 indexed taskId,
        uint32 committedRounds,
        uint256 trainersPot,
        uint256 sponsorRefund,
        uint256 syncerBondBurned
    );
    /// @notice `account` withdrew `amount` atto-units.
    event Withdrawn(address indexed account, uint256 amount);
    /// @notice `syncer` claimed its fees of a sealed run, `amount` atto-units (now withdrawable).
    event SyncerFeeClaimed(bytes32 indexed taskId, address indexed syncer, uint256 amount);
    /// @notice `amount` atto-units were burned (kept by the registry for ever); `from` is the
    /// slashed trainer or syncer.
    event StakeBurned(bytes32 indexed taskId, address indexed from, uint256 amount);

    // ---------------------------------------------------------------- errors

    error Registry__ZeroAddress();
    /// @dev A module passed to a constructor (RegistryEvidence to TrainingRegistry, RegistryRounds
    /// to RegistryEvidence) was deployed with other parameters than the contract taking it, or is
    /// not such a module: its code would run on the registry's storage with another token, fee,
    /// stake or timeout.
    error Registry__ModuleMismatch(address module);
    error Registry__ZeroAmount();
    error Registry__TransferShortfall(uint256 expected, uint256 received);
    /// @dev A *WithPermit call whose permit did not apply and whose allowance is short (atto-units).
    error Registry__AllowanceTooLow(address owner, uint256 allowance, uint256 needed);
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
    /// @notice The run is tier 1 (Allowlist) and its sponsor has not allowed `trainer` to enroll.
    error Registry__NotAllowed(bytes32 taskId, address trainer);
    error Registry__NotEnoughEnrolled(uint16 enrolled, uint16 quorum);
    error Registry__NotSyncer(bytes32 taskId, address caller);
    error Registry__SyncerStillActive(bytes32 taskId, address syncer, uint64 replaceableAt);
    error Registry__NoSyncerCandidates();
    error Registry__SyncerPoolFull(uint256 max);
    error Registry__NotSyncerCandidate(address account);
    error Registry__SyncerBusy(address syncer, uint32 activeTasks);
    /// @notice A change of the candidate's draw weight (a top-up, an exit) is refused until
    /// `fromBlock`: draws requested before its last change may still weigh it as it was.
    error Registry__SyncerChangePending(address account, uint256 fromBlock);
    error Registry__WrongRound(bytes32 taskId, uint32 given, uint32 open);
    error Registry__DeadlinePassed(bytes32 taskId, uint32 round, uint64 deadline);
    error Registry__BadFragment(uint16 fragment, uint16 fragmentCount);
    error Registry__InvalidSignature();
    error Registry__NotEnrolled(bytes32 taskId, address trainer);
    error Registry__DuplicateSubmission(bytes32 taskId, uint32 round, uint16 fragment, address trainer);
    error Registry__NoSuchSubmission(bytes32 taskId, uint32 round, uint16 fragment, address trainer);
    error Registry__UnknownReason(uint8 reason);
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
    /// @notice The signature does not recover to `trainer` over this (round, fragment, baseRoot, payload).
    error Registry__NotSignedBy(address trainer);
    /// @notice The evidence does not show the defect claimed (`reason`).
    error Registry__NotProven(uint8 reason);
    /// @notice The chunk opening does not verify against the committed root.
    error Registry__BadOpening(uint32 chunkIndex);
    /// @notice A norm-outlier proof must give the signed sum of squares of every other submission
    /// of the fragment, in ascending trainer index: `expected` of them, `given` were given.
    error Registry__IncompleteSubmissionSet(uint256 given, uint256 expected);
    /// @notice The task has no norm screen (normScreenSq = 0).
    error Registry__NoNormScreen(bytes32 taskId);
    /// @notice challengeSeconds is zero or longer than MAX_CHALLENGE_SECONDS.
    error Registry__BadChallengeWindow(uint32 seconds_, uint32 max);
    /// @notice An availability challenge is already pending for this submission.
    error Registry__ChallengePending(bytes32 taskId, uint32 round, uint16 fragment, address trainer);
    /// @notice The submission (round, fragment, trainer) has already been challenged for
    /// availability `limit` times (MAX_AVAILABILITY_CHALLENGES), answered or not: no more.
    error Registry__ChallengeLimit(bytes32 taskId, uint32 round, uint16 fragment, address trainer, uint8 limit);
    /// @notice cancelStalledRun: `candidate` (not the run's syncer) has the stake to be elected,
    /// so the run can go on (request an election instead).
    error Registry__RunCanGoOn(bytes32 taskId, address candidate);
    /// @notice No availability challenge is pending for this submission.
    error Registry__NoChallenge(bytes32 taskId, uint32 round, uint16 fragment, address trainer);
    /// @notice The challenge's answer window has passed (answer) or not yet passed (expire); seconds.
    error Registry__ChallengeDeadline(uint64 deadline);
    /// @notice commitRound, sealRootRun or cancelStalledRun while challenges are pending.
    error Registry__ChallengesPending(bytes32 taskId, uint16 count);
    /// @notice The run's sponsor has not committed its initial fragments root and outer rule yet
    /// (useRootFlow): nobody may enroll, and no round function applies.
    error Registry__NotRootFlow(bytes32 taskId);
    /// @notice The commit phase of `round` ended at `closes` (seconds): reveal now, or wait for the next round.
    error Registry__CommitPhaseOver(bytes32 taskId, uint32 round, uint64 closes);
    /// @notice The commit phase of `round` lasts until `closes` (seconds): no reveal and no early
    /// commit before.
    error Registry__CommitPhaseOpen(bytes32 taskId, uint32 round, uint64 closes);
    /// @notice A reveal without its commitment of this round's opening (or a zero commitment).
    error Registry__NotCommitted(bytes32 taskId, uint32 round, uint16 fragment, address trainer);
    /// @notice `pending` forced commitments are not revealed yet: the round commits early only
    /// once every one is revealed, else after its deadline.
    error Registry__RevealsPending(bytes32 taskId, uint32 round, uint16 pending);
}
