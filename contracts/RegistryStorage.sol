// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {ITrainingRegistryTypes} from "./interfaces/ITrainingRegistryTypes.sol";
import {ITrainingRegistryRounds} from "./interfaces/ITrainingRegistryRounds.sol";
import {ReceiptBuilder} from "./lib/ReceiptBuilder.sol";
import {RunRoot} from "./lib/RunRoot.sol";

/// @title RegistryStorage
/// @notice The storage layout, constants and shared helpers of the registry, inherited by both
/// TrainingRegistry and RegistryEvidence: the registry delegatecalls the evidence functions to
/// RegistryEvidence (its fallback), so both contracts must lay out storage identically, which
/// this one base guarantees (EIP712 and ReentrancyGuard in the same order, then the fields below).
abstract contract RegistryStorage is ITrainingRegistryTypes, EIP712, ReentrancyGuard {
    using SafeERC20 for IERC20;

    // ------------------------------------------------------------ constants

    /// @notice Largest trainer count M (bounds the seal's payout loop).
    uint16 public constant MAX_TRAINERS = 256;
    /// @notice Largest fragment count F (two state bits per fragment in one storage word).
    uint16 public constant MAX_FRAGMENTS = 128;
    /// @notice Largest max_rounds (bounds the seal's receipt build).
    uint32 public constant MAX_ROUNDS = 1024;
    /// @notice Largest grace window, milliseconds (30 days).
    uint64 public constant MAX_GRACE_WINDOW_MS = 30 days * 1000;
    /// @notice Largest syncer candidate pool (bounds the election loop).
    uint256 public constant MAX_SYNCER_CANDIDATES = 64;
    /// @notice Basis-point denominator.
    uint256 public constant BPS = 10_000;
    /// @notice Fraction of the remaining stake slashed per proven invalid submission (5 %).
    uint256 public constant INVALID_SLASH_BPS = 500;
    /// @notice Share of a proven slash paid to its prover, bps (10 %; the rest is burned).
    uint256 public constant BOUNTY_BPS = 1_000;
    /// @notice Bond of an availability challenge, bps of the run's syncerBond (10 %).
    uint256 public constant CHALLENGE_BOND_BPS = 1_000;
    /// @notice Longest answer window of an availability challenge, seconds (7 days).
    uint32 public constant MAX_CHALLENGE_SECONDS = 7 days;
    /// @notice How long trainers can claim after the seal (or a stalled run's cancel) before the
    /// sweep, seconds (90 days).
    uint64 public constant CLAIM_SECONDS = 90 days;
    /// @dev Claimed bits per bitmap word; bit 255 is the sentinel the seal sets.
    uint256 internal constant CLAIM_BITS = 255;
    uint256 internal constant SENTINEL = uint256(1) << 255;
    /// @notice Most availability challenges one submission (task, round, fragment, trainer) answers
    /// over its life, answered or pending (3): a sybil cannot load an honest trainer without end.
    uint8 public constant MAX_AVAILABILITY_CHALLENGES = 3;
    /// @dev Bit of _availCounts set once a submission's one whole-payload challenge was opened.
    uint8 internal constant WHOLE_CHALLENGED = 0x80;
    /// @notice Largest M * F: bounds the gas of commitRound (and of a round) at every shape.
    uint256 public constant MAX_SUBMISSION_SLOTS = 2048;
    /// @notice Largest syncer fee, basis points of the reward pool (20 %).
    uint16 public constant MAX_SYNCER_FEE_BPS = 2_000;
    /// @notice Longest enrollment window, seconds (30 days).
    uint32 public constant MAX_ENROLLMENT_SECONDS = 30 days;
    /// @notice Blocks after a request during which electSyncer can read its block hash.
    uint256 public constant ELECTION_WINDOW_BLOCKS = 256;
    /// @notice Tier 0 (Open): anyone with the minimum stake may enroll.
    uint8 public constant TIER_OPEN = 0;
    /// @notice Tier 1 (Allowlist): the Open rules, but only addresses the sponsor has allowed
    /// (`allowTrainers`) may enroll, so sybils cannot fill the run (issue #26).
    uint8 public constant TIER_ALLOWLIST = 1;
    /// @notice EIP-712 type hash of a trainer's submission.
    bytes32 public constant OUTER_GRADIENT_TYPEHASH = keccak256(
        "OuterGradient(bytes32 taskId,uint32 round,uint16 fragment,bytes32 baseRoot,bytes32 payloadRoot,uint32 payloadSumsq,string cid,bytes32 payloadHash)"
    );

    /// @dev Submission states of the forced path, two bits per fragment (0 none).
    uint256 internal constant ST_SUBMITTED = 1;
    uint256 internal constant ST_REJECTED = 2;

    // ------------------------------------------------------------ storage

    /// @dev One run. Slot 0 holds everything submitOuterGradient reads.
    struct Run {
        RunStatus status;
        uint32 currentRound;
        uint64 roundDeadline;
        uint16 fragmentCount;
        uint16 trainerCount;
        uint16 quorum;
        uint16 enrolledCount;
        uint8 aggregation;
        uint8 tier;
        uint32 revealSeconds; // root flow: min(challengeSeconds, graceWindowSeconds / 2), the reveal phase
        uint16 epoch; // root flow: rewinds so far; keys the open round's submissions (`_subsOf`)
        // slot 1
        address syncer;
        uint64 roundOpenedAt;
        uint32 graceWindowSeconds;
        // slot 2
        address sponsor;
        uint32 maxRounds;
        uint32 innerSteps;
        uint16 syncerFeeBps;
        uint16 openChallenges; // availability challenges pending (seal waits for none)
        // slot 3
        uint64 postedAt;
        uint64 enrollmentDeadline;
        uint64 syncerElectedAt;
        uint64 electionBlock;
        // slot 4
        uint32 normScreenSq; // binary32 bits; 0 = no norm screen
        uint32 challengeSeconds;
        // seconds: the latest answer deadline of an availability challenge opened in this run (a
        // syncer is not replaceable before it plus the timeout: it cannot commit while one is open)
        uint64 challengesUntil;
        bytes32 specHash;
        bytes32 initialWeightsRoot;
        bytes32 weightsRoot;
        uint256 minStake;
        uint256 rewardPool;
        uint256 poolLeft;
        uint256 stakeHeld;
        uint256 totalCredits;
        uint256 distributedPool;
        uint256 syncerBond;
        string specCid;
        uint64[] fragmentSizes;
    }

    /// @dev One trainer of one run: stake and slashes share slot 0 (the seal's refund and a slash
    /// read both), index and enrollment slot 1 (what a submission or proof checks).
    struct Trainer {
        uint128 stake;
        uint128 slashed;
        uint16 index;
        bool enrolled;
    }

    /// @dev Root-flow state of one run (PROTOCOL.md §5). run.totalCredits is the cumulative
    /// total of the last committed round; run.poolLeft, after the seal, the unclaimed pool.
    struct RootRun {
        bool enabled;
        uint64 claimDeadline; // seconds: set by the seal; sweep after it
        address committer; // the syncer whose commits rounds committerFrom.. are (0 after a rewind)
        // forced commitments of the open round's opening not revealed yet (0 when a round opens:
        // commitRound and the rewind reset it)
        uint16 unrevealed;
        // slot 1: the outer optimizer and rule parameters the aggregate proof recomputes with
        uint32 lr; // binary32 bit pattern of float32(spec lr)
        uint32 mu; // binary32 bit pattern of float32(spec momentum)
        uint16 alphaBps; // TrimmedMean's trim fraction, < 5000
        bool nesterov;
        uint32 committerFrom; // first round committed by `committer`
        uint16 openSlotChallenges; // slot-preimage challenges pending (the seal waits for none)
        uint32 pastCommitters; // spans in _committerSpans (the committers before `committer`)
        bytes32 initialFragmentsRoot;
        bytes32 creditsRoot; // cumulative credits after the last committed round
    }

    /// @dev A pending slot-preimage challenge: who posted it, the round's commitment word it is
    /// about (void if the round is rewound and committed again), the answer deadline and the bond.
    struct SlotChallenge {
        address challenger;
        uint64 deadline; // seconds
        bytes32 commitment;
        uint256 bond; // atto-units
    }

    /// @dev One syncer candidate.
    struct SyncerEntry {
        uint128 stake;
        uint32 activeTasks;
        uint32 listIndex;
        bool registered;
        uint128 locked; // sum of the bonds of the runs it is syncer of (<= stake)
        uint64 changedAt; // block of the last change of its draw weight (registration, top-up, exit)
        uint64 joinedAt; // block of its registration: it weighs 0 in draws requested at or before it
        uint128 weight; // its draw weight in elections requested after changedAt: its stake, 0 once leaving
        uint128 weightBefore; // its draw weight in elections requested at or before changedAt
    }

    /// @dev The ERC-20 of stakes, rewards and bonds.
    IERC20 internal immutable _token;
    /// @dev Smallest syncer pay per round a task may offer, atto-units (postTask's check). An
    /// immutable, so each contract holds its own copy: the deployer passes the same value to the
    /// registry and its modules, and each constructor checks its module's (_requireModule).
    uint256 internal immutable _minSyncerFeePerRound;

    mapping(bytes32 taskId => Run) internal _runs;
    bytes32[] internal _runIds;
    mapping(bytes32 taskId => mapping(address trainer => Trainer)) internal _trainers;
    mapping(bytes32 taskId => mapping(address trainer => string)) internal _dids;
    mapping(bytes32 taskId => address[]) internal _trainerList;
    /// @dev Two bits per fragment: 0 none, 1 submitted, 2 rejected, 3 accepted; by the round's
    /// opening (`_subsOf`: epoch << 32 | round).
    mapping(bytes32 taskId => mapping(uint64 opening => mapping(uint256 trainerIndex => uint256 states)))
        internal _subs;
    mapping(bytes32 taskId => mapping(uint32 round => RoundRecord)) internal _rounds;
    mapping(bytes32 taskId => TrainingReceipt) internal _receipts;
    mapping(address account => uint256 amount) internal _withdrawable;
    mapping(address syncer => SyncerEntry) internal _syncers;
    address[] internal _syncerList;
    mapping(bytes32 taskId => mapping(address syncer => uint256 amount)) internal _syncerFees;
    uint256 internal _burned;
    /// @dev Pending availability challenges, by (task, round, trainerIndex * 256 + fragment).
    mapping(bytes32 taskId => mapping(uint32 round => mapping(uint256 slot => AvailabilityChallenge))) internal _avail;
    /// @dev Challenge bonds held (pending challenges), atto-units.
    uint256 internal _bondsHeld;
    /// @dev Round state of each run (PROTOCOL.md §5); `enabled` false until the sponsor's useRootFlow.
    mapping(bytes32 taskId => RootRun) internal _rootRuns;
    /// @dev Per root-flow round: keccak256(fragmentsRoot ‖ creditsRoot ‖ uint256 totalCredits ‖
    /// keccak256(counts as uint16[])): one word per round, its preimage is in RoundCommitted.
    mapping(bytes32 taskId => mapping(uint32 round => bytes32 commitment)) internal _rootCommitments;
    /// @dev Root-flow claims made, one bit per trainer index.
    mapping(bytes32 taskId => mapping(uint256 word => uint256 bits)) internal _claimedBits;
    /// @dev Pending slot-preimage challenges (PROTOCOL.md §5 challenge 2), by (task, round,
    /// trainerIndex * 256 + fragment).
    mapping(bytes32 taskId => mapping(uint32 round => mapping(uint256 slot => SlotChallenge))) internal _slotChallenges;
    /// @dev Root flow: the epoch a committed round was committed in, written only when not 0
    /// (a run that was never rewound writes nothing).
    mapping(bytes32 taskId => mapping(uint32 round => uint16 epoch)) internal _roundEpochs;
    /// @dev Root-flow forced-submission commitments (PROTOCOL.md §5, copy protection), by (task,
    /// round, the round's opening time, trainerIndex * 256 + fragment): keccak256(abi.encode(
    /// structHash, trainer)). Keyed by the opening so that a rewound round starts with none.
    mapping(
        bytes32 taskId => mapping(uint32 round => mapping(uint64 openedAt => mapping(uint256 slot => bytes32)))
    ) internal _forcedCommitments;
    /// @dev Root flow: the committers before RootRun.committer, oldest first (RootRun.pastCommitters
    /// of them), so that a proof of round r convicts round r's own committer and takes each
    /// discarded round's fee back from whoever was paid it (PROTOCOL.md §5 "Rewind"). Span k is
    /// uint256(from) << 160 | uint160(committer): it committed rounds from `from` up to span k + 1's
    /// `from` (RootRun.committerFrom after the last). Written only when the committer changes.
    mapping(bytes32 taskId => mapping(uint256 k => uint256 span)) internal _committerSpans;
    /// @dev Availability challenges opened against each submission so far, by (task, the round's
    /// opening as in _subs: epoch << 32 | round, trainerIndex * 256 + fragment); kept after a
    /// challenge closes: chunk challenges in bits 0..6, bounded by MAX_AVAILABILITY_CHALLENGES,
    /// and WHOLE_CHALLENGED once its one whole-payload challenge opened. Keyed by the epoch so that a
    /// rewound round's new submission starts at 0.
    mapping(bytes32 taskId => mapping(uint64 opening => mapping(uint256 slot => uint8 count))) internal _availCounts;
    /// @dev Tier 1 (Allowlist) runs: the addresses the sponsor allowed to enroll (`allowTrainers`).
    mapping(bytes32 taskId => mapping(address trainer => bool)) internal _allowed;
    /// @dev Proof commitments (PROTOCOL.md §5 "Bounties"): keccak256(abi.encode(keccak256(the
    /// proof's calldata), prover)) -> the block it was first committed in (`commitProof`).
    mapping(bytes32 commitment => uint256 blockNumber) internal _proofCommits;

    // ------------------------------------------------------------ constructor

    /// @param token_ the ERC-20 of stakes and rewards (any ERC-20 without transfer fees)
    /// @param minSyncerFeePerRound_ smallest syncer pay per round a task may offer, atto-units
    constructor(IERC20 token_, uint256 minSyncerFeePerRound_) EIP712("TenzroTrainingRegistry", "2") {
        if (address(token_) == address(0)) revert Registry__ZeroAddress();
        _token = token_;
        _minSyncerFeePerRound = minSyncerFeePerRound_;
    }

    // ------------------------------------------------------------ shared helpers

    /// @dev Who a proof's bounty goes to: `prover` when it committed to this call's calldata
    /// (`commitProof`) in an earlier block, else address(0) (the bounty is burned): a proof copied
    /// from the mempool convicts as well, but pays its copier nothing.
    function _committedProver(address prover) internal view returns (address) {
        uint256 at = _proofCommits[keccak256(abi.encode(keccak256(msg.data), prover))];
        return at != 0 && at < block.number ? prover : address(0);
    }

    /// @dev The run of `taskId`; reverts Registry__UnknownTask when none was posted.
    function _existing(bytes32 taskId) internal view returns (Run storage run) {
        run = _runs[taskId];
        if (run.status == RunStatus.None) revert Registry__UnknownTask(taskId);
    }

    /// @dev The run of `taskId`, which must be in `status`.
    function _runIn(bytes32 taskId, RunStatus status) internal view returns (Run storage run) {
        run = _existing(taskId);
        _requireStatus(run, taskId, status);
    }

    /// @dev The run, which must be Sealed or Cancelled (claims and fees of an ended run); reverts
    /// Registry__WrongStatus.
    function _runEnded(bytes32 taskId) internal view returns (Run storage run) {
        run = _existing(taskId);
        RunStatus status = run.status;
        if (status != RunStatus.Sealed && status != RunStatus.Cancelled) revert Registry__WrongStatus(taskId, status);
    }

    /// @dev Root flow: opens the claims of `taskId` (n trainers) until now + CLAIM_SECONDS and
    /// returns that deadline, seconds. A set sentinel bit in each claimed-bitmap word: every claim
    /// then changes a non-zero word (5k gas instead of 22k for the first claim of a word).
    function _openClaims(RootRun storage rr, bytes32 taskId, uint256 n) internal returns (uint64 deadline) {
        mapping(uint256 => uint256) storage bits = _claimedBits[taskId];
        for (uint256 w = 0; w <= n / CLAIM_BITS; ++w) {
            bits[w] = SENTINEL;
        }
        deadline = uint64(block.timestamp) + CLAIM_SECONDS;
        rr.claimDeadline = deadline;
    }

    /// @dev Reverts Registry__WrongStatus unless the run is in `status`.
    function _requireStatus(Run storage run, bytes32 taskId, RunStatus status) internal view {
        if (run.status != status) revert Registry__WrongStatus(taskId, run.status);
    }

    /// @dev Burns `amount` atto-units slashed from `from` (they stay in this contract).
    function _burn(bytes32 taskId, address from, uint256 amount) internal {
        _burned += amount;
        emit StakeBurned(taskId, from, amount);
    }

    /// @dev Key of (trainer index, fragment) in `_avail`.
    function _slotKey(uint256 index, uint16 fragment) internal pure returns (uint256) {
        return (index << 8) | fragment;
    }

    /// @dev Key of a weights (or momentum) chunk challenge of `fragment` in `_slotChallenges`
    /// (PROTOCOL.md §5, issue #23 attack 2): bit 255 set, so it never meets a slot key (< 2^16).
    function _weightsKey(uint16 fragment, bool momentum, uint32 chunkIndex) internal pure returns (uint256) {
        return SENTINEL | (uint256(chunkIndex) << 9) | (momentum ? 256 : 0) | fragment;
    }

    /// @dev Pulls exactly `amount` tokens from `from`; reverts on fee-on-transfer shortfalls.
    function _pullExact(address from, uint256 amount) internal {
        if (amount == 0) return;
        uint256 before = _token.balanceOf(address(this));
        _token.safeTransferFrom(from, address(this), amount);
        uint256 afterwards = _token.balanceOf(address(this));
        uint256 received = afterwards > before ? afterwards - before : 0;
        if (received != amount) revert Registry__TransferShortfall(amount, received);
    }

    // ------------------------------------------------------------ post and enroll

    /// @dev postTask's checks and effects for the caller as sponsor, then pulls exactly
    /// p.rewardPool atto-units from it (allowance needed). Shared by TrainingRegistry.postTask and
    /// RegistryEvidence.postTaskWithPermit; callers hold the reentrancy lock.
    function _postTask(TaskParams calldata p) internal {
        uint32 graceSeconds = _validate(p);
        Run storage run = _runs[p.taskId];
        run.status = RunStatus.Enrolling;
        run.fragmentCount = p.fragmentCount;
        run.trainerCount = p.trainerCount;
        run.quorum = p.quorum;
        run.aggregation = p.aggregation;
        run.tier = p.tier;
        run.graceWindowSeconds = graceSeconds;
        run.sponsor = msg.sender;
        run.maxRounds = p.maxRounds;
        run.innerSteps = p.innerSteps;
        run.postedAt = uint64(block.timestamp);
        run.enrollmentDeadline = uint64(block.timestamp) + p.enrollmentSeconds;
        run.syncerFeeBps = p.syncerFeeBps;
        run.syncerBond = p.syncerBond;
        run.normScreenSq = p.normScreenSq;
        run.challengeSeconds = p.challengeSeconds;
        run.revealSeconds = p.challengeSeconds < graceSeconds / 2 ? p.challengeSeconds : graceSeconds / 2;
        run.specHash = p.specHash;
        run.initialWeightsRoot = p.initialWeightsRoot;
        run.weightsRoot = p.initialWeightsRoot;
        run.minStake = p.minStake;
        run.rewardPool = p.rewardPool;
        run.poolLeft = p.rewardPool;
        run.specCid = p.specCid;
        run.fragmentSizes = p.fragmentSizes;
        _runIds.push(p.taskId);
        emit TaskPosted(p.taskId, msg.sender, p, graceSeconds);
        // interaction last; a short transfer reverts everything above
        _pullExact(msg.sender, p.rewardPool);
    }

    /// @dev enrollTrainer's checks and effects for the caller as trainer (opens round 0 when it is
    /// the M-th), then pulls exactly `stake` atto-units from it (allowance needed). Shared by
    /// TrainingRegistry.enrollTrainer and RegistryEvidence.enrollTrainerWithPermit; callers hold
    /// the reentrancy lock.
    function _enrollTrainer(bytes32 taskId, uint256 stake, string calldata did) internal {
        Run storage run = _existing(taskId);
        // the rounds' initial fragments root and outer rule must be committed before anyone stakes
        if (!_rootRuns[taskId].enabled) revert Registry__NotRootFlow(taskId);
        uint16 index = run.enrolledCount;
        // checked before the status: a full run has moved on to Training
        if (index >= run.trainerCount) revert Registry__EnrollmentFull(taskId, run.trainerCount);
        _requireStatus(run, taskId, RunStatus.Enrolling);
        if (block.timestamp > run.enrollmentDeadline) {
            revert Registry__EnrollmentClosed(taskId, run.enrollmentDeadline);
        }
        if (bytes(did).length == 0) revert Registry__EmptyDid();
        if (run.tier == TIER_ALLOWLIST && !_allowed[taskId][msg.sender]) revert Registry__NotAllowed(taskId, msg.sender);
        if (stake < run.minStake) revert Registry__StakeTooLow(stake, run.minStake);
        Trainer storage t = _trainers[taskId][msg.sender];
        if (t.enrolled) revert Registry__AlreadyEnrolled(taskId, msg.sender);

        t.index = index;
        t.enrolled = true;
        t.stake = SafeCast.toUint128(stake);
        _dids[taskId][msg.sender] = did;
        _trainerList[taskId].push(msg.sender);
        run.enrolledCount = index + 1;
        run.stakeHeld += stake;
        emit TrainerEnrolled(taskId, msg.sender, index, index, run.trainerCount, stake, did);
        if (index + 1 == run.trainerCount) _openRound(run, taskId, 0);
        // interaction last; a short transfer reverts everything above
        _pullExact(msg.sender, stake);
    }

    /// @dev Checks a task's parameters; returns the grace window in whole seconds (rounded up).
    function _validate(TaskParams calldata p) internal view returns (uint32) {
        if (p.taskId == bytes32(0)) revert Registry__ZeroTaskId();
        if (_runs[p.taskId].status != RunStatus.None) revert Registry__TaskExists(p.taskId);
        if (p.trainerCount == 0) revert Registry__ZeroTrainers();
        if (p.trainerCount > MAX_TRAINERS) revert Registry__TooManyTrainers(p.trainerCount, MAX_TRAINERS);
        if (p.quorum == 0) revert Registry__ZeroQuorum();
        if (p.quorum > p.trainerCount) revert Registry__QuorumExceedsTrainers(p.quorum, p.trainerCount);
        if (p.fragmentCount == 0) revert Registry__ZeroFragments();
        if (p.fragmentCount > MAX_FRAGMENTS) revert Registry__TooManyFragments(p.fragmentCount, MAX_FRAGMENTS);
        if (p.fragmentSizes.length != p.fragmentCount) {
            revert Registry__FragmentSizesLength(p.fragmentSizes.length, p.fragmentCount);
        }
        for (uint256 i = 0; i < p.fragmentCount; ++i) {
            // forge-lint: disable-next-line(unsafe-typecast) -- i < fragmentCount, a uint16
            if (p.fragmentSizes[i] == 0) revert Registry__ZeroFragmentSize(uint16(i));
        }
        if (p.challengeSeconds == 0 || p.challengeSeconds > MAX_CHALLENGE_SECONDS) {
            revert Registry__BadChallengeWindow(p.challengeSeconds, MAX_CHALLENGE_SECONDS);
        }
        if (p.maxRounds == 0) revert Registry__ZeroMaxRounds();
        if (p.maxRounds > MAX_ROUNDS) revert Registry__TooManyRounds(p.maxRounds, MAX_ROUNDS);
        if (p.innerSteps == 0) revert Registry__ZeroInnerSteps();
        if (p.graceWindowMs == 0) revert Registry__ZeroGraceWindow();
        if (p.graceWindowMs > MAX_GRACE_WINDOW_MS) {
            revert Registry__GraceWindowTooLong(p.graceWindowMs, MAX_GRACE_WINDOW_MS);
        }
        if (p.tier > TIER_ALLOWLIST) revert Registry__UnsupportedTier(p.tier);
        if (p.aggregation > uint8(AggregationRule.Krum)) revert Registry__UnknownAggregation(p.aggregation);
        // Krum ranks whole payloads by distances: no single coordinate proves it wrong (PROTOCOL.md §1)
        if (p.aggregation == uint8(AggregationRule.Krum)) revert Registry__RuleNotProvable(p.aggregation, p.tier);
        if (uint256(p.trainerCount) * p.fragmentCount > MAX_SUBMISSION_SLOTS) {
            revert Registry__ShapeTooLarge(p.trainerCount, p.fragmentCount, MAX_SUBMISSION_SLOTS);
        }
        if (p.minStake == 0) revert Registry__ZeroMinStake();
        if (p.enrollmentSeconds == 0 || p.enrollmentSeconds > MAX_ENROLLMENT_SECONDS) {
            revert Registry__BadEnrollmentWindow(p.enrollmentSeconds, MAX_ENROLLMENT_SECONDS);
        }
        if (p.syncerFeeBps > MAX_SYNCER_FEE_BPS) revert Registry__SyncerFeeTooHigh(p.syncerFeeBps, MAX_SYNCER_FEE_BPS);
        if (p.syncerBond == 0) revert Registry__ZeroSyncerBond();
        uint256 perRound = (p.rewardPool * p.syncerFeeBps) / BPS / p.maxRounds;
        if (perRound < _minSyncerFeePerRound) revert Registry__SyncerFeeTooLow(perRound, _minSyncerFeePerRound);
        // ceil(ms / 1000) <= 2_592_000 fits uint32
        return uint32((p.graceWindowMs + 999) / 1000);
    }

    /// @dev Bond of a challenge of this run: syncerBond * CHALLENGE_BOND_BPS / BPS, atto-units.
    function _challengeBond(Run storage run) internal view returns (uint256) {
        return (run.syncerBond * CHALLENGE_BOND_BPS) / BPS;
    }

    /// @dev After round `round` is committed: the run completes after its last round, else the
    /// next round opens.
    function _advance(Run storage run, bytes32 taskId, uint32 round) internal {
        if (round + 1 == run.maxRounds) {
            run.status = RunStatus.Completed;
            run.currentRound = run.maxRounds;
        } else {
            _openRound(run, taskId, round + 1);
        }
    }

    /// @dev Forwards the call to `ext` by delegatecall (its code on this contract's storage) and
    /// returns or reverts with its result: the registry's fallback chain.
    function _delegate(address ext) internal {
        // slither-disable-next-line assembly
        assembly ("memory-safe") {
            // temporary use of the memory past the free-memory pointer (allowed for memory-safe code)
            let ptr := mload(0x40)
            calldatacopy(ptr, 0, calldatasize())
            let ok := delegatecall(gas(), ext, ptr, calldatasize(), 0, 0)
            returndatacopy(ptr, 0, returndatasize())
            if iszero(ok) { revert(ptr, returndatasize()) }
            return(ptr, returndatasize())
        }
    }

    /// @dev Constructors only: reverts Registry__ZeroAddress when `module` has no code and
    /// Registry__ModuleMismatch unless its answer to `configCall` is exactly `expected` (the
    /// ABI-encoded parameters of the contract taking it), so a module deployed with another token,
    /// fee, stake or timeout cannot be wired in.
    function _requireModule(address module, bytes memory configCall, bytes memory expected) internal view {
        if (module.code.length == 0) revert Registry__ZeroAddress();
        (bool ok, bytes memory got) = module.staticcall(configCall);
        if (!ok || keccak256(got) != keccak256(expected)) revert Registry__ModuleMismatch(module);
    }

    /// @dev Opens `round`: status Training, deadline = now + grace window.
    function _openRound(Run storage run, bytes32 taskId, uint32 round) internal {
        uint64 openedAt = uint64(block.timestamp);
        uint64 deadline = openedAt + run.graceWindowSeconds;
        run.status = RunStatus.Training;
        run.currentRound = round;
        run.roundOpenedAt = openedAt;
        run.roundDeadline = deadline;
        emit RoundOpened(taskId, round, run.weightsRoot, openedAt, deadline);
    }

    /// @dev Accrues one round's syncer fee (rewardPool * syncerFeeBps / BPS / maxRounds) from
    /// the pool to the committing syncer (msg.sender).
    function _accrueSyncerFee(Run storage run, bytes32 taskId) internal {
        uint256 fee = _syncerFeePerRound(run);
        if (fee == 0) return;
        // poolLeft >= rewardPool - fees accrued so far >= fee: slashes never reduce the pool and
        // at most maxRounds fees of rewardPool * feeBps / BPS / maxRounds are taken
        run.poolLeft -= fee;
        _syncerFees[taskId][msg.sender] += fee;
    }

    /// @dev The syncer fee of one committed round, atto-units.
    function _syncerFeePerRound(Run storage run) internal view returns (uint256) {
        return (run.rewardPool * run.syncerFeeBps) / BPS / run.maxRounds;
    }

    /// @dev First block in which a syncer candidate's draw weight may change again (0: now; a
    /// fresh entry or one whose only change was its registration; PROTOCOL.md §3).
    function _changeableFrom(SyncerEntry storage s) internal view returns (uint256) {
        uint64 at = s.changedAt;
        return at == s.joinedAt ? 0 : at + ELECTION_WINDOW_BLOCKS + 1;
    }

    /// @dev Takes the run's bond from `syncer` for a failure (replacement or a proven lie): its
    /// stake and locked stake shrink by the bond and it serves one run fewer. The caller burns the
    /// bond (or pays part of it as a bounty). Returns the bond, atto-units.
    function _forfeitBond(Run storage run, address syncer) internal returns (uint256 bond) {
        bond = run.syncerBond;
        SyncerEntry storage s = _syncers[syncer];
        // forge-lint: disable-next-line(unsafe-typecast) -- bond <= locked <= stake < 2**128
        s.stake -= uint128(bond);
        // forge-lint: disable-next-line(unsafe-typecast) -- bond <= locked < 2**128
        s.locked -= uint128(bond);
        s.activeTasks -= 1;
        // its draw weights shrink with it, for open draws too (PROTOCOL.md §3): a weight never
        // exceeds the stake, so a later top-up cannot bring back what the bond took
        s.weight = _less(s.weight, bond);
        s.weightBefore = _less(s.weightBefore, bond);
    }

    /// @dev `w - x`, or 0 when x >= w.
    function _less(uint128 w, uint256 x) private pure returns (uint128) {
        // forge-lint: disable-next-line(unsafe-typecast) -- x < w <= 2**128 - 1
        return x >= w ? 0 : w - uint128(x);
    }

    /// @dev When a silent syncer of a Training run becomes replaceable (seconds): its clock
    /// starts at the latest of the round deadline, its own election and the answer deadline of
    /// the last availability challenge (it cannot commit while one is open), so a syncer elected
    /// late or blocked by a challenge is never replaceable at once. `timeout` is the registry's
    /// syncerTimeout (an immutable of the registry and of RegistryEvidence).
    function _replaceableAt(Run storage run, uint32 timeout) internal view returns (uint64) {
        uint64 deadline = run.roundDeadline;
        uint64 elected = run.syncerElectedAt;
        uint64 challenged = run.challengesUntil;
        uint64 from = elected > deadline ? elected : deadline;
        // the clock does not run while an availability challenge blocks the commit
        return (challenged > from ? challenged : from) + timeout;
    }

    /// @dev Reverts Registry__NotSignedBy unless `signature` is `trainer`'s EIP-712 signature of
    /// the OuterGradient struct hash `structHash` (this registry's domain); a malformed signature
    /// never passes, not even for `trainer` = address(0).
    function _requireSignedBy(bytes32 structHash, bytes calldata signature, address trainer) internal view {
        address signer = _signerOf(structHash, signature);
        if (signer == address(0) || signer != trainer) revert Registry__NotSignedBy(trainer);
    }

    /// @dev The signer of the EIP-712 OuterGradient struct hash `structHash` (this registry's
    /// domain), or address(0) for a malformed signature.
    function _signerOf(bytes32 structHash, bytes calldata signature) internal view returns (address) {
        // the third value (the error's argument) only matters for OZ's own error messages
        // slither-disable-next-line unused-return
        (address signer, ECDSA.RecoverError err,) = ECDSA.tryRecover(_hashTypedDataV4(structHash), signature);
        return err == ECDSA.RecoverError.NoError ? signer : address(0);
    }

    /// @dev Reverts unless `round` is the open round of a Training run, its deadline has not
    /// passed and `fragment` < F.
    function _checkSubmissionWindow(bytes32 taskId, uint32 round, uint16 fragment)
        internal
        view
        returns (Run storage run)
    {
        run = _runs[taskId];
        _requireStatus(run, taskId, RunStatus.Training);
        if (round != run.currentRound) revert Registry__WrongRound(taskId, round, run.currentRound);
        if (block.timestamp > run.roundDeadline) revert Registry__DeadlinePassed(taskId, round, run.roundDeadline);
        if (fragment >= run.fragmentCount) revert Registry__BadFragment(fragment, run.fragmentCount);
    }

    /// @dev The enrolled trainer `trainer` of `taskId` (reverts Registry__NotEnrolled).
    function _activeTrainer(bytes32 taskId, address trainer) internal view returns (Trainer storage t) {
        t = _trainers[taskId][trainer];
        if (!t.enrolled) revert Registry__NotEnrolled(taskId, trainer);
    }

    /// @dev GradientSubmitted of a recorded submission (its own function: the legacy pipeline
    /// runs out of stack slots in the callers otherwise).
    function _emitSubmitted(bytes32 taskId, uint32 round, uint16 fragment, address trainer, SignedPayload calldata s)
        internal
    {
        emit GradientSubmitted(
            taskId, round, fragment, trainer, s.cid, s.payloadHash, s.payloadRoot, s.payloadSumsq, s.signature
        );
    }

    /// @dev The round state of `taskId` (reverts Registry__NotRootFlow before useRootFlow).
    function _rootOf(bytes32 taskId) internal view returns (RootRun storage rr) {
        rr = _rootRuns[taskId];
        if (!rr.enabled) revert Registry__NotRootFlow(taskId);
    }

    /// @dev End of the open round's commit phase, seconds: roundDeadline - min(challengeSeconds,
    /// graceWindowSeconds / 2). Forced commitments until then (inclusive), reveals after it.
    function _commitDeadline(Run storage run) internal view returns (uint64) {
        return run.roundDeadline - run.revealSeconds; // both in slot 0
    }

    /// @dev The submissions of `round` in the opening of epoch `epoch` (the run's rewinds before
    /// it; PROTOCOL.md §5 "Rewind"). A round reopened by a rewind starts with none: a forced
    /// submission signed over a discarded round's weights can neither convict the syncer of the
    /// new opening (proveOmission) nor keep its trainer from submitting again. A run never rewound stays at 0.
    function _subsOf(bytes32 taskId, uint32 round, uint16 epoch)
        internal
        view
        returns (mapping(uint256 => uint256) storage)
    {
        return _subs[taskId][(uint64(epoch) << 32) | round];
    }

    /// @dev Marks (trainer, round, fragment) submitted and returns the trainer's index; reverts for
    /// an unknown trainer and for a second submission.
    function _recordSubmission(bytes32 taskId, uint32 round, uint16 fragment, address trainer)
        internal
        returns (uint256 index)
    {
        Trainer storage t = _activeTrainer(taskId, trainer);
        mapping(uint256 => uint256) storage roundSubs = _subsOf(taskId, round, _runs[taskId].epoch);
        index = t.index;
        uint256 states = roundSubs[index];
        uint256 shift = 2 * uint256(fragment);
        if ((states >> shift) & 3 != 0) revert Registry__DuplicateSubmission(taskId, round, fragment, trainer);
        roundSubs[index] = states | (ST_SUBMITTED << shift);
    }

    /// @dev Rounds committed so far (each accrued one syncer fee): the open round's number while
    /// Training, every round once Completed or Sealed, none before round 0 or when Cancelled.
    function _roundsFinalized(Run storage run) internal view returns (uint256) {
        RunStatus status = run.status;
        if (status == RunStatus.Training) return run.currentRound;
        if (status == RunStatus.Completed || status == RunStatus.Sealed) return run.maxRounds;
        return 0;
    }

    /// @dev Rounds committed so far (Training: the open round's number; Completed: all); a
    /// Sealed or earlier run has none open to proofs (Registry__WrongStatus).
    function _committedRounds(Run storage run, bytes32 taskId) internal view returns (uint32) {
        RunStatus status = run.status;
        if (status != RunStatus.Training && status != RunStatus.Completed) {
            revert Registry__WrongStatus(taskId, status);
        }
        // forge-lint: disable-next-line(unsafe-typecast) -- at most maxRounds (uint32)
        return uint32(_roundsFinalized(run));
    }

    /// @dev Round r is committed (Registry__RoundNotCommitted: r >= `committed`, the rounds
    /// committed so far) and its challenge window, finalizedAt + challengeSeconds, open
    /// (Registry__ChallengeWindowClosed).
    function _checkWindow(Run storage run, bytes32 taskId, uint32 r, uint32 committed) internal view {
        if (r >= committed) revert ITrainingRegistryRounds.Registry__RoundNotCommitted(taskId, r);
        uint64 until = _rounds[taskId][r].finalizedAt + run.challengeSeconds;
        if (block.timestamp > until) revert ITrainingRegistryRounds.Registry__ChallengeWindowClosed(taskId, r, until);
    }

    /// @dev Removes a slot or weights challenge (`key` of the round) from the books and pays its
    /// bond to `payee` (withdrawable). Shared by RegistryRounds and RegistryEvidence.
    function _settleChallenge(bytes32 taskId, uint32 round, uint256 key, address payee) internal {
        mapping(uint256 => SlotChallenge) storage open = _slotChallenges[taskId][round];
        uint256 bond = open[key].bond;
        _bondsHeld -= bond;
        _rootRuns[taskId].openSlotChallenges -= 1;
        delete open[key];
        _withdrawable[payee] += bond;
    }

    /// @dev Credits every trainer of the run its stake minus its slashes (withdrawable) and
    /// empties run.stakeHeld; returns the number of trainers.
    function _refundStakes(Run storage run, bytes32 taskId) internal returns (uint256 m) {
        address[] storage list = _trainerList[taskId];
        m = list.length;
        for (uint256 i = 0; i < m; ++i) {
            address trainer = list[i];
            Trainer storage t = _trainers[taskId][trainer];
            uint256 refund = uint256(t.stake) - t.slashed;
            _withdrawable[trainer] += refund;
            emit PayoutCredited(taskId, trainer, 0, refund);
        }
        run.stakeHeld = 0;
    }

    /// @dev Unlocks the run's bond from its syncer (seal).
    function _releaseSyncer(Run storage run) internal {
        address syncer = run.syncer;
        if (syncer == address(0)) return;
        SyncerEntry storage s = _syncers[syncer];
        s.activeTasks -= 1;
        // forge-lint: disable-next-line(unsafe-typecast) -- the bond was added to locked at election
        s.locked -= uint128(run.syncerBond);
    }

    /// @dev Seals the Completed run: status Sealed, the receipt stored (encoding v1, built by
    /// `builder` from the stored rounds), the syncer's bond released. Payouts are the caller's.
    function _sealReceipt(Run storage run, bytes32 taskId, ReceiptBuilder builder)
        internal
        returns (TrainingReceipt storage rc)
    {
        run.status = RunStatus.Sealed;
        rc = _receipts[taskId];
        rc.taskId = taskId;
        rc.specHash = run.specHash;
        rc.finalModelHash = run.weightsRoot;
        rc.rounds = run.maxRounds;
        rc.trainerCount = run.enrolledCount;
        rc.chainId = block.chainid;
        rc.registry = address(this);
        rc.sealedAt = uint64(block.timestamp);
        (, rc.transcriptRoot, rc.runRoot) = _encode(rc, builder);
        _releaseSyncer(run);
    }

    /// @dev The serialized receipt (encoding v1) rebuilt from the stored rounds (each digest with
    /// its challenge status folded in), with its transcript root and run root (through `builder`).
    function _encode(TrainingReceipt memory rc, ReceiptBuilder builder)
        internal
        view
        returns (bytes memory serialized, bytes32 transcriptRoot, bytes32 runRoot)
    {
        uint32 rounds = rc.rounds;
        bytes32[] memory digests = new bytes32[](rounds);
        bytes32[] memory transcripts = new bytes32[](rounds);
        mapping(uint32 => RoundRecord) storage recs = _rounds[rc.taskId];
        for (uint32 r = 0; r < rounds; ++r) {
            RoundRecord storage rec = recs[r];
            digests[r] = RunRoot.withStatus(rec.roundDigest, rec.challengeStatus);
            transcripts[r] = rec.transcriptHash;
        }
        return builder.build(
            rc.chainId, rc.registry, rc.taskId, rc.specHash, rc.finalModelHash, rc.trainerCount, digests, transcripts
        );
    }

    /// @dev EIP-712 hashStruct of OuterGradient (PROTOCOL.md §4).
    function _structHash(bytes32 taskId, uint32 round, uint16 fragment, bytes32 baseRoot, SignedPayload calldata s)
        internal
        pure
        returns (bytes32)
    {
        return keccak256(
            abi.encode(
                OUTER_GRADIENT_TYPEHASH,
                taskId,
                round,
                fragment,
                baseRoot,
                s.payloadRoot,
                s.payloadSumsq,
                keccak256(bytes(s.cid)),
                s.payloadHash
            )
        );
    }
}
