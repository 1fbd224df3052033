// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {ITrainingRegistryTypes} from "./interfaces/ITrainingRegistryTypes.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {ITrainingRegistry} from "./interfaces/ITrainingRegistry.sol";
import {ReceiptBuilder} from "./lib/ReceiptBuilder.sol";
import {RegistryStorage} from "./RegistryStorage.sol";
import {ITrainingRegistryEvidence} from "./interfaces/ITrainingRegistryEvidence.sol";

/// @title TrainingRegistry
/// @notice The trust anchor of tenzro-train: a sponsor escrows a reward pool, trainers
/// stake, an elected syncer commits each round, and a sealed receipt proves the run.
/// See ITrainingRegistry for the API, `contracts/RECEIPT.md` for the receipt encoding.
/// @dev Lifecycle rules (all amounts token atto-units, all times unix seconds):
/// - postTask escrows the reward pool; the grace window is given in ms and stored
///   rounded UP to whole seconds. Round r's deadline = its opening time + grace window.
/// - Syncer pool: a first registration needs minSyncerStake; a full pool (64) admits a
///   newcomer only by displacing the smallest idle candidate with less stake.
/// - Syncer election (contracts/PROTOCOL.md §4, THREATS.md): only for a Training run, in
///   two steps. requestSyncerElection records block n; electSyncer, from block n+1 and
///   within 256 blocks, draws stake-weighted among candidates with stake >= minSyncerStake
///   whose unlocked stake covers the run's syncerBond, seeded with blockhash(n), which no
///   transaction of block n can know (the proposer of block n can still bias it). The
///   elected syncer locks syncerBond until the seal (or its replacement). It becomes
///   replaceable syncerTimeout seconds after the later of the round deadline and its
///   election; replacing it burns its bond for the run, once, and excludes it from that draw.
/// - Syncer fee: each committed round (commitRound) accrues rewardPool * syncerFeeBps / BPS /
///   maxRounds from the pool to its committer, claimable after the seal (claimSyncerFee); the
///   fees of a round a proof discards go back to the pool (PROTOCOL.md §5). postTask refuses a
///   fee per round below minSyncerFeePerRound: a run cannot lock a syncer's bond for nothing.
/// - One flow (PROTOCOL.md §5): after postTask the sponsor commits the run's initial fragments
///   root and outer rule (useRootFlow); enrollment is refused until it has. Rounds are committed
///   by root (commitRound: the fragments root, the cumulative credits root, the counts); trainers
///   deliver their payloads off-chain and force them on-chain only when left out (commitSubmission,
///   then submitOuterGradient after the commit phase). Proofs (proveAggregate, proveBitmap,
///   proveOmission, the slot and weights challenges) discard a wrong round and convict its
///   committer; sealRootRun seals after the last round's challenge window and trainers claim
///   their share against the final credits root (claim).
/// - Enrollment: stake >= minStake, at most M, until postedAt + enrollmentSeconds; trainer
///   index i trains data shard i of M. Round 0 opens when the M-th trainer enrolls, or when
///   anyone closes enrollment after the deadline with >= K enrolled; with fewer than K after
///   the deadline anyone may cancel.
/// - Invalid payloads (PROTOCOL.md §4): a slash needs evidence this contract checks (an
///   opened chunk, or an unanswered availability challenge); INVALID_SLASH_BPS of the remaining
///   stake per invalid submission, BOUNTY_BPS of it to the prover.
/// - Slashed stake (trainers' and replaced syncers' bonds) is burned: it stays in this
///   contract for ever (burned()), so no party, the sponsor included, gains by a slash.
/// - Payouts are credited to withdrawable balances and pulled with withdraw(). Conservation:
///   token balance = sum over live runs (poolLeft + stakeHeld) + sum of unclaimed syncer
///   fees + syncer stakes + challenge bonds held + withdrawable + burned.
/// - Evidence functions (ITrainingRegistryEvidence: forced submissions, proveInvalid, availability challenges,
///   cancelTask, cancelStalledRun) and the
///   permit variants of postTask / enrollTrainer (ITrainingRegistryPermit: an ERC-2612 permit of
///   the token instead of a prior approve, one transaction, no allowance left) run in
///   RegistryEvidence's code on this contract's storage: the fallback delegatecalls every
///   selector this contract does not define to the RegistryEvidence passed to its constructor.
///   postTask / enrollTrainer and their permit variants share RegistryStorage._postTask /
///   _enrollTrainer, so both paths apply the same rules.
contract TrainingRegistry is RegistryStorage, ITrainingRegistry {
    using SafeERC20 for IERC20;

    uint256 private immutable _minSyncerStake;
    uint32 private immutable _syncerTimeout;
    /// @dev Stateless receipt encoder deployed by the constructor (keeps this contract < 24 KiB).
    ReceiptBuilder private immutable _builder;
    /// @dev The evidence functions' code, RegistryEvidence (delegatecalled by the fallback).
    address private immutable _extension;

    // ------------------------------------------------------------ constructor

    /// @param token_ the ERC-20 of stakes and rewards (any ERC-20 without transfer fees)
    /// @param minSyncerStake_ minimum syncer pool stake for election, token atto-units
    /// @param syncerTimeout_ seconds after the later of a round deadline and the syncer's
    /// election before a silent syncer can be replaced
    /// @param minSyncerFeePerRound_ smallest syncer pay per round a task may offer, atto-units
    /// @param evidence_ the RegistryEvidence module (evidence, permit and, through its own
    /// fallback, RegistryRounds' root-flow functions), deployed beforehand with this token, fee,
    /// stake and timeout and a RegistryRounds of the same token and fee (the registry's init code
    /// cannot hold their code under EIP-3860's 49,152 bytes); reverts Registry__ZeroAddress when it
    /// has no code, Registry__ModuleMismatch when its evidenceModuleConfig() differs
    constructor(
        IERC20 token_,
        uint256 minSyncerStake_,
        uint32 syncerTimeout_,
        uint256 minSyncerFeePerRound_,
        address evidence_
    ) RegistryStorage(token_, minSyncerFeePerRound_) {
        _requireModule(
            evidence_,
            abi.encodeCall(ITrainingRegistryEvidence.evidenceModuleConfig, ()),
            abi.encode(token_, minSyncerFeePerRound_, minSyncerStake_, syncerTimeout_)
        );
        _minSyncerStake = minSyncerStake_;
        _syncerTimeout = syncerTimeout_;
        _builder = new ReceiptBuilder();
        _extension = evidence_;
    }

    /// @notice Every selector not defined here (ITrainingRegistryEvidence, ITrainingRegistryPermit,
    /// ITrainingRegistryRounds) runs in RegistryEvidence's code on this contract's storage, which
    /// passes the root-flow selectors on to RegistryRounds; an unknown selector reverts there.
    fallback() external {
        _delegate(_extension);
    }

    // ------------------------------------------------------------ syncer pool

    /// @inheritdoc ITrainingRegistry
    function registerSyncer(uint256 amount) external nonReentrant {
        if (amount == 0) revert Registry__ZeroAmount();
        SyncerEntry storage s = _syncers[msg.sender];
        if (!s.registered) {
            if (amount < _minSyncerStake) revert Registry__SyncerStakeTooLow(amount, _minSyncerStake);
            uint256 slot = _syncerList.length;
            if (slot >= MAX_SYNCER_CANDIDATES) slot = _makeRoom(amount);
            s.registered = true;
            // forge-lint: disable-next-line(unsafe-typecast) -- slot < 2 * MAX_SYNCER_CANDIDATES fits uint32
            s.listIndex = uint32(slot);
            if (slot == _syncerList.length) _syncerList.push(msg.sender);
            else _syncerList[slot] = msg.sender; // a hole (below)
        }
        uint256 total = uint256(s.stake) + amount;
        s.stake = SafeCast.toUint128(total);
        _reweigh(msg.sender, s, total);
        if (s.joinedAt == 0) s.joinedAt = s.changedAt;
        emit SyncerRegistered(msg.sender, amount, total);
        _pullExact(msg.sender, amount);
    }

    /// @inheritdoc ITrainingRegistry
    function unregisterSyncer() external {
        SyncerEntry storage s = _syncers[msg.sender];
        if (!s.registered) revert Registry__NotSyncerCandidate(msg.sender);
        if (s.activeTasks != 0) revert Registry__SyncerBusy(msg.sender, s.activeTasks);
        if (s.weight != 0) {
            _reweigh(msg.sender, s, 0); // asks to leave: it weighs 0 in draws requested from now on
            emit SyncerLeaving(msg.sender, s.changedAt + ELECTION_WINDOW_BLOCKS + 1);
        } else {
            _settled(msg.sender, s);
            _removeCandidate(msg.sender);
        }
    }

    // ------------------------------------------------------------ lifecycle

    /// @inheritdoc ITrainingRegistry
    function postTask(TaskParams calldata p) external nonReentrant {
        _postTask(p);
    }

    /// @inheritdoc ITrainingRegistry
    function requestSyncerElection(bytes32 taskId) external {
        Run storage run = _runIn(taskId, RunStatus.Training);
        uint64 pending = run.electionBlock;
        if (pending != 0 && block.number <= pending + ELECTION_WINDOW_BLOCKS) {
            revert Registry__ElectionPending(taskId, pending);
        }
        _requireReplaceable(run, taskId);
        run.electionBlock = uint64(block.number);
        emit SyncerElectionRequested(taskId, run.currentRound, block.number);
    }

    /// @inheritdoc ITrainingRegistry
    function electSyncer(bytes32 taskId) external returns (address syncer) {
        Run storage run = _runIn(taskId, RunStatus.Training);
        uint256 requested = run.electionBlock;
        if (requested == 0) revert Registry__NoElectionRequested(taskId);
        if (block.number <= requested) revert Registry__ElectionNotReady(taskId, requested);
        if (block.number > requested + ELECTION_WINDOW_BLOCKS) revert Registry__ElectionExpired(taskId, requested);
        // the syncer may have finalized since the request: then it is no longer replaceable
        _requireReplaceable(run, taskId);
        run.electionBlock = 0;
        address previous = run.syncer;
        uint256 bond = run.syncerBond;
        uint256 previousSlashed = 0;
        if (previous != address(0)) {
            // the failure is punished once: the previous syncer's bond for this run is burned
            previousSlashed = _forfeitBond(run, previous);
            _burn(taskId, previous, previousSlashed);
        }
        syncer = _draw(taskId, run.currentRound, previous, bond, requested);
        run.syncer = syncer;
        run.syncerElectedAt = uint64(block.timestamp);
        SyncerEntry storage s = _syncers[syncer];
        s.activeTasks += 1;
        // forge-lint: disable-next-line(unsafe-typecast) -- _draw checked stake - locked >= bond
        s.locked += uint128(bond);
        emit SyncerElected(taskId, syncer, previous, run.currentRound, s.stake, previousSlashed);
    }

    /// @inheritdoc ITrainingRegistry
    function enrollTrainer(bytes32 taskId, uint256 stake, string calldata did) external nonReentrant {
        _enrollTrainer(taskId, stake, did);
    }

    /// @inheritdoc ITrainingRegistry
    function allowTrainers(bytes32 taskId, address[] calldata trainers) external {
        Run storage run = _runIn(taskId, RunStatus.Enrolling);
        if (msg.sender != run.sponsor) revert Registry__NotSponsor(taskId, msg.sender);
        if (run.tier != TIER_ALLOWLIST) revert Registry__UnsupportedTier(run.tier);
        for (uint256 i = 0; i < trainers.length; ++i) {
            _allowed[taskId][trainers[i]] = true;
            emit TrainerAllowed(taskId, trainers[i]);
        }
    }

    /// @inheritdoc ITrainingRegistry
    function closeEnrollment(bytes32 taskId) external {
        Run storage run = _runIn(taskId, RunStatus.Enrolling);
        if (block.timestamp <= run.enrollmentDeadline) {
            revert Registry__EnrollmentStillOpen(taskId, run.enrollmentDeadline);
        }
        if (run.enrolledCount < run.quorum) revert Registry__NotEnoughEnrolled(run.enrolledCount, run.quorum);
        _openRound(run, taskId, 0);
    }

    /// @inheritdoc ITrainingRegistry
    function claimSyncerFee(bytes32 taskId) external returns (uint256 amount) {
        _runEnded(taskId);
        amount = _syncerFees[taskId][msg.sender];
        if (amount == 0) revert Registry__NoSyncerFee(taskId, msg.sender);
        _syncerFees[taskId][msg.sender] = 0;
        _withdrawable[msg.sender] += amount;
        emit SyncerFeeClaimed(taskId, msg.sender, amount);
    }

    /// @inheritdoc ITrainingRegistry
    function withdraw() external nonReentrant returns (uint256 amount) {
        amount = _withdrawable[msg.sender];
        if (amount == 0) revert Registry__NothingToWithdraw(msg.sender);
        _withdrawable[msg.sender] = 0;
        emit Withdrawn(msg.sender, amount);
        // interaction last (checks-effects-interactions); a failing transfer reverts the zeroing
        _token.safeTransfer(msg.sender, amount);
    }

    // ------------------------------------------------------------ views

    /// @inheritdoc ITrainingRegistry
    function token() external view returns (address) {
        return address(_token);
    }

    /// @inheritdoc ITrainingRegistry
    function minSyncerStake() external view returns (uint256) {
        return _minSyncerStake;
    }

    /// @inheritdoc ITrainingRegistry
    function syncerTimeout() external view returns (uint32) {
        return _syncerTimeout;
    }

    /// @inheritdoc ITrainingRegistry
    function minSyncerFeePerRound() external view returns (uint256) {
        return _minSyncerFeePerRound;
    }

    /// @inheritdoc ITrainingRegistry
    function burned() external view returns (uint256) {
        return _burned;
    }

    /// @inheritdoc ITrainingRegistry
    function syncerFeeOf(bytes32 taskId, address syncer) external view returns (uint256) {
        return _syncerFees[taskId][syncer];
    }

    /// @inheritdoc ITrainingRegistry
    function runBinding(bytes32 taskId)
        external
        view
        returns (bytes32 runRoot, address sponsor, bytes32 specHash, uint256 totalCredits)
    {
        Run storage run = _runs[taskId];
        return (_receipts[taskId].runRoot, run.sponsor, run.specHash, run.totalCredits);
    }

    /// @inheritdoc ITrainingRegistry
    function outerGradientDigest(
        bytes32 taskId,
        uint32 round,
        uint16 fragment,
        bytes32 baseRoot,
        SignedPayload calldata s
    ) external view returns (bytes32) {
        return _hashTypedDataV4(_structHash(taskId, round, fragment, baseRoot, s));
    }

    /// @inheritdoc ITrainingRegistry
    function getRun(bytes32 taskId) external view returns (RunView memory v) {
        Run storage run = _existing(taskId);
        v.taskId = taskId;
        v.status = run.status;
        v.sponsor = run.sponsor;
        v.syncer = run.syncer;
        v.specHash = run.specHash;
        v.specCid = run.specCid;
        v.initialWeightsRoot = run.initialWeightsRoot;
        v.weightsRoot = run.weightsRoot;
        v.trainerCount = run.trainerCount;
        v.quorum = run.quorum;
        v.fragmentCount = run.fragmentCount;
        v.enrolledCount = run.enrolledCount;
        v.innerSteps = run.innerSteps;
        v.maxRounds = run.maxRounds;
        v.graceWindowSeconds = run.graceWindowSeconds;
        v.aggregation = run.aggregation;
        v.tier = run.tier;
        v.currentRound = run.currentRound;
        v.roundOpenedAt = run.roundOpenedAt;
        v.roundDeadline = run.roundDeadline;
        v.syncerReplaceableAt = run.status == RunStatus.Training ? _replaceableAt(run, _syncerTimeout) : 0;
        v.enrollmentDeadline = run.enrollmentDeadline;
        v.syncerElectedAt = run.syncerElectedAt;
        v.electionBlock = run.electionBlock;
        v.syncerFeeBps = run.syncerFeeBps;
        v.syncerBond = run.syncerBond;
        v.syncerFeesAccrued = _syncerFeePerRound(run) * _roundsFinalized(run);
        v.normScreenSq = run.normScreenSq;
        v.challengeSeconds = run.challengeSeconds;
        v.openChallenges = run.openChallenges;
        v.postedAt = run.postedAt;
        v.minStake = run.minStake;
        v.rewardPool = run.rewardPool;
        v.rewardPoolLeft = run.poolLeft;
        v.stakeHeld = run.stakeHeld;
        v.totalCredits = run.totalCredits;
        v.fragmentSizes = run.fragmentSizes;
    }

    /// @inheritdoc ITrainingRegistry
    function getReceipt(bytes32 taskId)
        external
        view
        returns (TrainingReceipt memory receipt, bytes memory serialized)
    {
        _runIn(taskId, RunStatus.Sealed);
        receipt = _receipts[taskId];
        (serialized,,) = _encode(receipt, _builder);
    }

    /// @inheritdoc ITrainingRegistry
    function sealedRunRoot(bytes32 taskId) external view returns (bytes32) {
        return _receipts[taskId].runRoot; // written only by seal
    }

    /// @inheritdoc ITrainingRegistry
    function getRound(bytes32 taskId, uint32 round) external view returns (RoundRecord memory) {
        _existing(taskId);
        return _rounds[taskId][round];
    }

    /// @inheritdoc ITrainingRegistry
    function trainersOf(bytes32 taskId) external view returns (address[] memory) {
        _existing(taskId);
        return _trainerList[taskId];
    }

    /// @inheritdoc ITrainingRegistry
    function withdrawable(address account) external view returns (uint256) {
        return _withdrawable[account];
    }

    /// @inheritdoc ITrainingRegistry
    function syncerInfo(address account)
        external
        view
        returns (uint256 stake, uint32 activeTasks, bool registered, uint256 locked)
    {
        SyncerEntry storage s = _syncers[account];
        return (s.stake, s.activeTasks, s.registered, s.locked);
    }

    /// @inheritdoc ITrainingRegistry
    function syncerCandidates() external view returns (address[] memory list) {
        list = _syncerList;
        uint256 n = 0;
        for (uint256 i = 0; i < list.length; ++i) {
            if (list[i] != address(0)) list[n++] = list[i]; // the holes left out
        }
        assembly ("memory-safe") {
            mstore(list, n)
        }
    }

    // ------------------------------------------------------------ internal

    /// @dev Reverts Registry__SyncerStillActive unless the run has no syncer or its syncer is
    /// replaceable now.
    function _requireReplaceable(Run storage run, bytes32 taskId) private view {
        address current = run.syncer;
        if (current == address(0)) return;
        uint64 replaceableAt = _replaceableAt(run, _syncerTimeout);
        if (block.timestamp <= replaceableAt) revert Registry__SyncerStillActive(taskId, current, replaceableAt);
    }

    /// @dev Removes `account` from the candidate pool; its whole stake becomes withdrawable.
    function _removeCandidate(address account) private {
        SyncerEntry storage s = _syncers[account];
        uint256 stake = s.stake;
        uint256 idx = s.listIndex;
        // no other entry moves: the order the draws walk (PROTOCOL.md §3) stays as it was, and a
        // removed candidate weighs 0 in every draw that can still be resolved, so a hole changes
        // no pick; the next newcomer of a full list fills it
        if (idx == _syncerList.length - 1) _syncerList.pop();
        else _syncerList[idx] = address(0);
        delete _syncers[account];
        _withdrawable[account] += stake;
        emit SyncerUnregistered(account, stake);
    }

    /// @dev Makes room for a newcomer staking `amount` when the list is full (a walk of the list,
    /// so only then) and returns its slot: the lowest hole, else the end of the list. Candidates
    /// whose exit has taken effect (weight 0, idle, window passed) leave first; if
    /// MAX_SYNCER_CANDIDATES candidates still weigh, the idle one with the smallest stake below
    /// `amount` (whose weight may change now) starts to leave, so it keeps its weight in draws
    /// requested before. Reverts Registry__SyncerPoolFull when none can, or when the list
    /// (leavers included) holds 2 * MAX_SYNCER_CANDIDATES without a hole.
    function _makeRoom(uint256 amount) private returns (uint256 slot) {
        address victim;
        uint256 smallest = type(uint256).max;
        uint256 weighing = 0;
        slot = type(uint256).max;
        for (uint256 i = _syncerList.length; i > 0; --i) {
            address a = _syncerList[i - 1];
            if (a == address(0)) {
                slot = i - 1; // backwards: the last one found is the lowest
                continue;
            }
            SyncerEntry storage e = _syncers[a];
            bool free = e.activeTasks == 0 && _changeableFrom(e) <= block.number;
            if (e.weight == 0) {
                if (!free) continue;
                _removeCandidate(a);
                if (i - 1 < _syncerList.length) slot = i - 1; // a hole now (else popped)
            } else {
                ++weighing;
                if (free && e.stake < smallest) (victim, smallest) = (a, e.stake);
            }
        }
        uint256 n = _syncerList.length;
        if (slot > n) slot = n;
        if (slot == n && n >= 2 * MAX_SYNCER_CANDIDATES) revert Registry__SyncerPoolFull(MAX_SYNCER_CANDIDATES);
        if (weighing < MAX_SYNCER_CANDIDATES) return slot;
        if (victim == address(0) || amount <= smallest) revert Registry__SyncerPoolFull(MAX_SYNCER_CANDIDATES);
        _reweigh(victim, _syncers[victim], 0);
        emit SyncerLeaving(victim, block.number + ELECTION_WINDOW_BLOCKS + 1);
    }

    /// @dev Sets candidate `a`'s draw weight to `w` for elections requested after this block;
    /// those requested at or before it keep the weight it had (PROTOCOL.md §3). Several changes
    /// in one block are one change, and the first change after the registration is free (draws
    /// requested at or before the registration weigh 0 by joinedAt); otherwise reverts
    /// Registry__SyncerChangePending until the window of the previous change has passed, so no
    /// draw still open sees two weights.
    function _reweigh(address a, SyncerEntry storage s, uint256 w) private {
        if (s.changedAt != block.number) {
            _settled(a, s);
            s.weightBefore = s.weight;
            s.changedAt = uint64(block.number);
        }
        s.weight = SafeCast.toUint128(w);
    }

    /// @dev Reverts Registry__SyncerChangePending while a draw requested at or before the
    /// candidate's last change can still be resolved.
    function _settled(address a, SyncerEntry storage s) private view {
        uint256 from = _changeableFrom(s);
        if (block.number < from) revert Registry__SyncerChangePending(a, from);
    }

    /// @dev Stake-weighted pick among candidates with stake >= minSyncerStake whose unlocked
    /// stake covers `bond`, excluding `exclude`. Reverts Registry__NoSyncerCandidates when
    /// none is eligible. `seed` is the hash of the request block, which no transaction of
    /// that block can read (PROTOCOL.md §4; the proposer's residual bias is in THREATS.md).
    /// Cost: two passes over at most MAX_SYNCER_CANDIDATES entries.
    function _draw(bytes32 taskId, uint32 round, address exclude, uint256 bond, uint256 requestBlock)
        private
        view
        returns (address)
    {
        bytes32 seed = blockhash(requestBlock);
        address[] storage list = _syncerList;
        uint256 n = list.length;
        uint256 total = 0;
        for (uint256 i = 0; i < n; ++i) {
            address a = list[i];
            if (a != exclude) total += _eligibleStake(a, bond, requestBlock);
        }
        if (total == 0) revert Registry__NoSyncerCandidates();
        // no global nonce: the outcome depends only on this request, so elections of other runs
        // in between cannot be used to steer it
        uint256 pick = uint256(keccak256(abi.encode(seed, taskId, round, exclude))) % total;
        for (uint256 i = 0; i < n; ++i) {
            address a = list[i];
            if (a == exclude) continue;
            uint256 w = _eligibleStake(a, bond, requestBlock);
            if (pick < w) return a;
            pick -= w;
        }
        // unreachable: pick < total = sum of the eligible stakes
        revert Registry__NoSyncerCandidates();
    }

    /// @dev A candidate's weight in a draw for a run with `bond` requested at `requestBlock`: its
    /// draw weight as of the request (0 when it joined at or after the request block, weightBefore
    /// when it last changed at or after it, so nobody joins, tops up or leaves after seeing the
    /// seed; a forfeited bond lowers both at once) when that is at least minSyncerStake and, less
    /// its locked bonds, still covers the bond, else 0.
    function _eligibleStake(address a, uint256 bond, uint256 requestBlock) private view returns (uint256) {
        SyncerEntry storage e = _syncers[a];
        uint256 w = e.joinedAt >= requestBlock ? 0 : (e.changedAt >= requestBlock ? e.weightBefore : e.weight);
        // the bond must fit in that weight too: a top-up after the request cannot make room
        if (w < _minSyncerStake || w < uint256(e.locked) + bond) return 0;
        return w;
    }
}
