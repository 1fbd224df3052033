// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";
import {ITrainingRegistryTypes} from "./interfaces/ITrainingRegistryTypes.sol";

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
    /// @notice Fraction of the remaining stake slashed at eviction (10 %).
    uint256 public constant EVICTION_SLASH_BPS = 1_000;
    /// @notice Fraction of the remaining stake slashed per proven invalid submission (5 %).
    uint256 public constant INVALID_SLASH_BPS = 500;
    /// @notice Share of a proven slash paid to its prover, bps (10 %; the rest is burned).
    uint256 public constant BOUNTY_BPS = 1_000;
    /// @notice Bond of an availability challenge, bps of the run's syncerBond (10 %).
    uint256 public constant CHALLENGE_BOND_BPS = 1_000;
    /// @notice Longest answer window of an availability challenge, seconds (7 days).
    uint32 public constant MAX_CHALLENGE_SECONDS = 7 days;
    /// @notice Largest M * F: bounds the gas of finalizeRound (and of a round) at every shape.
    uint256 public constant MAX_SUBMISSION_SLOTS = 2048;
    /// @notice Largest syncer fee, basis points of the reward pool (20 %).
    uint16 public constant MAX_SYNCER_FEE_BPS = 2_000;
    /// @notice Longest enrollment window, seconds (30 days).
    uint32 public constant MAX_ENROLLMENT_SECONDS = 30 days;
    /// @notice Blocks after a request during which electSyncer can read its block hash.
    uint256 public constant ELECTION_WINDOW_BLOCKS = 256;
    /// @notice Tier 0 (Open) is the only one supported.
    uint8 public constant TIER_OPEN = 0;
    /// @notice EIP-712 type hash of a trainer's submission.
    bytes32 public constant OUTER_GRADIENT_TYPEHASH =
        keccak256(
            "OuterGradient(bytes32 taskId,uint32 round,uint16 fragment,bytes32 baseRoot,bytes32 payloadRoot,uint32 payloadSumsq,string cid,bytes32 payloadHash)"
        );

    /// @dev Submission states, two bits per fragment.
    uint256 internal constant ST_SUBMITTED = 1;
    uint256 internal constant ST_REJECTED = 2;
    uint256 internal constant ST_ACCEPTED = 3;

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
        uint16 activeCount;
        uint8 maxMisses;
        uint8 aggregation;
        uint8 tier;
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

    /// @dev One trainer of one run. Slot 0 holds everything submitOuterGradient reads.
    struct Trainer {
        uint16 index;
        bool enrolled;
        bool evicted;
        uint32 submitted;
        uint32 accepted;
        uint32 missedRounds;
        uint32 totalMissed;
        uint128 stake;
        uint128 slashed;
        uint256 credits;
    }

    /// @dev One syncer candidate.
    struct SyncerEntry {
        uint128 stake;
        uint32 activeTasks;
        uint32 listIndex;
        bool registered;
        uint128 locked; // sum of the bonds of the runs it is syncer of (<= stake)
        uint64 stakedAtBlock; // block of its last registerSyncer: it draws only in elections requested later
    }

    /// @dev The ERC-20 of stakes, rewards and bonds.
    IERC20 internal immutable _token;

    mapping(bytes32 taskId => Run) internal _runs;
    bytes32[] internal _runIds;
    mapping(bytes32 taskId => mapping(address trainer => Trainer)) internal _trainers;
    mapping(bytes32 taskId => mapping(address trainer => string)) internal _dids;
    mapping(bytes32 taskId => address[]) internal _trainerList;
    /// @dev Two bits per fragment: 0 none, 1 submitted, 2 rejected, 3 accepted.
    mapping(bytes32 taskId => mapping(uint32 round => mapping(uint256 trainerIndex => uint256 states))) internal _subs;
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

    // ------------------------------------------------------------ constructor

    /// @param token_ the ERC-20 of stakes and rewards (any ERC-20 without transfer fees)
    constructor(IERC20 token_) EIP712("TenzroTrainingRegistry", "2") {
        if (address(token_) == address(0)) revert Registry__ZeroAddress();
        _token = token_;
    }

    // ------------------------------------------------------------ shared helpers

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

    /// @dev Pulls exactly `amount` tokens from `from`; reverts on fee-on-transfer shortfalls.
    function _pullExact(address from, uint256 amount) internal {
        if (amount == 0) return;
        uint256 before = _token.balanceOf(address(this));
        _token.safeTransferFrom(from, address(this), amount);
        uint256 afterwards = _token.balanceOf(address(this));
        uint256 received = afterwards > before ? afterwards - before : 0;
        if (received != amount) revert Registry__TransferShortfall(amount, received);
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
