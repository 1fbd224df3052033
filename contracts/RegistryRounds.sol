// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {ITrainingRegistryRounds} from "./interfaces/ITrainingRegistryRounds.sol";
import {ITrainingRegistryViews} from "./interfaces/ITrainingRegistryViews.sol";
import {ReceiptBuilder} from "./lib/ReceiptBuilder.sol";
import {AggregateReferee} from "./AggregateReferee.sol";
import {ITrainingRegistryEvidence} from "./interfaces/ITrainingRegistryEvidence.sol";
import {RoundProofs} from "./lib/RoundProofs.sol";
import {RunRoot} from "./lib/RunRoot.sol";
import {RegistryStorage} from "./RegistryStorage.sol";

/// @title RegistryRounds
/// @notice Rounds committed by root, the fraud proofs (aggregate, bitmap, omission, slot preimage) with the
/// syncer's slash and the rewind, the root-flow seal, Merkle claims and the sweep
/// (contracts/PROTOCOL.md §5). Deployed first and passed to RegistryEvidence's constructor;
/// its functions run only by delegatecall from the registry (through RegistryEvidence's
/// fallback), on the registry's storage (RegistryStorage's layout).
/// @dev A round costs a constant number of storage writes whatever M and F: the RoundRecord the
/// receipt is built from and one commitment word, keccak256(fragmentsRoot ‖
/// creditsRoot ‖ uint256 totalCredits ‖ keccak256(abi.encodePacked(acceptedBitmaps))), whose
/// preimage is in RoundCommitted. The registry computes the cumulative credits and the counts
/// itself from the accepted bitmaps and the previous credits (calldata, checked against the last
/// credits root), so claims rest on its own sums. Anyone proves a round wrong within its window:
/// the aggregate at one coordinate (`proveAggregate`, RoundProofs, PROTOCOL.md §6), the bitmaps
/// against a fragment's accepted set (`proveBitmap`), a live forced submission left out
/// (`proveOmission`), a credited slot whose signed preimage nobody shows after a bonded
/// `challengeSlot` (`expireSlot`), a chunk of the new weights or momentum nobody opens after a
/// bonded `challengeWeights` (RegistryEvidence; `expireWeights`).
contract RegistryRounds is RegistryStorage, ITrainingRegistryRounds, ITrainingRegistryViews {
    /// @dev Stateless receipt encoder (the same code as the registry's own).
    ReceiptBuilder private immutable _builder;

    /// @dev Stateless aggregate recomputation (RoundProofs.aggregateMismatch) for proveAggregate.
    AggregateReferee private immutable _referee;

    /// @param token_ the registry's ERC-20
    /// @param minSyncerFeePerRound_ the registry's minimum syncer pay per round, atto-units
    constructor(IERC20 token_, uint256 minSyncerFeePerRound_) RegistryStorage(token_, minSyncerFeePerRound_) {
        _builder = new ReceiptBuilder();
        _referee = new AggregateReferee();
    }

    /// @inheritdoc ITrainingRegistryRounds
    function roundsModuleConfig() external view returns (address token, uint256 minSyncerFeePerRound) {
        return (address(_token), _minSyncerFeePerRound);
    }

    /// @inheritdoc ITrainingRegistryRounds
    function useRootFlow(bytes32 taskId, bytes32 initialFragmentsRoot, OuterRule calldata outer) external {
        Run storage run = _runIn(taskId, RunStatus.Enrolling);
        if (msg.sender != run.sponsor) revert Registry__NotSponsor(taskId, msg.sender);
        RootRun storage rr = _rootRuns[taskId];
        if (run.enrolledCount != 0 || rr.enabled) revert Registry__RootFlowLocked(taskId);
        // Krum has no coordinate proof; a trim of half or more leaves nothing to average
        if (run.aggregation > uint8(AggregationRule.CoordinateMedian) || outer.alphaBps >= BPS / 2) {
            revert Registry__OuterRuleNotProvable(run.aggregation, outer.alphaBps);
        }
        rr.enabled = true;
        rr.lr = outer.lr;
        rr.mu = outer.mu;
        rr.alphaBps = outer.alphaBps;
        rr.nesterov = outer.nesterov;
        rr.initialFragmentsRoot = initialFragmentsRoot;
        emit RootFlowEnabled(taskId, initialFragmentsRoot, outer);
    }

    /// @inheritdoc ITrainingRegistryRounds
    function commitRound(RootCommit calldata c) external {
        Run storage run = _runIn(c.taskId, RunStatus.Training);
        RootRun storage rr = _rootOf(c.taskId);
        // address(0) never sends transactions; the check only guards simulated calls
        if (msg.sender != run.syncer || msg.sender == address(0)) revert Registry__NotSyncer(c.taskId, msg.sender);
        if (c.round != run.currentRound) revert Registry__WrongRound(c.taskId, c.round, run.currentRound);
        if (block.timestamp <= run.roundDeadline) {
            // an early commit waits for the reveal phase and for every forced commitment's reveal,
            // so a trainer the syncer ignores keeps its whole window
            uint64 closes = _commitDeadline(run);
            if (block.timestamp <= closes) revert Registry__CommitPhaseOpen(c.taskId, c.round, closes);
            if (rr.unrevealed != 0) revert Registry__RevealsPending(c.taskId, c.round, rr.unrevealed);
        } else if (rr.unrevealed != 0) {
            rr.unrevealed = 0; // commitments never revealed lapse with their round
        }
        // every availability challenge of the round is answered or expired first, so a forced
        // submission's state at any later proof is its state at this commit (proveOmission)
        if (run.openChallenges != 0) revert Registry__ChallengesPending(c.taskId, run.openChallenges);
        (bytes32 creditsRoot, uint256 total, uint32 accepted) = _credit(run, rr.creditsRoot, c);

        bytes32 weightsRoot = RunRoot.weightsRoot(c.fragmentHashes);
        RoundRecord storage rec = _rounds[c.taskId][c.round];
        // rec.weightsRoot stays 0: the round digest binds it (RoundCommitted carries it), and one
        // storage word less per round keeps a round under 300k gas
        rec.transcriptHash = c.transcriptHash;
        rec.roundDigest = RunRoot.roundDigest(c.round, weightsRoot, c.transcriptHash, accepted);
        rec.acceptedCount = accepted;
        rec.finalizedAt = uint64(block.timestamp);
        rec.openedAt = run.roundOpenedAt;
        rec.challengeStatus = RunRoot.STATUS_UNCHALLENGED; // a round committed again after a rewind starts clean
        bytes32 commitment = keccak256(
            abi.encodePacked(c.fragmentsRoot, creditsRoot, total, keccak256(abi.encodePacked(c.acceptedBitmaps)))
        );
        _rootCommitments[c.taskId][c.round] = commitment;
        if (run.epoch != 0) _roundEpochs[c.taskId][c.round] = run.epoch; // proveOmission reads that opening
        rr.creditsRoot = creditsRoot;
        if (rr.committer != msg.sender) _newCommitter(rr, c.taskId, c.round);
        run.totalCredits = total;
        run.weightsRoot = weightsRoot;
        _accrueSyncerFee(run, c.taskId);
        _emitCommitted(c, weightsRoot, creditsRoot, total);

        _advance(run, c.taskId, c.round);
    }

    /// @inheritdoc ITrainingRegistryRounds
    function sealRootRun(bytes32 taskId) external {
        Run storage run = _runIn(taskId, RunStatus.Completed);
        RootRun storage rr = _rootOf(taskId);
        uint64 until = _rounds[taskId][run.maxRounds - 1].finalizedAt + run.challengeSeconds;
        if (block.timestamp <= until) revert Registry__ChallengeWindowOpen(taskId, until);
        uint16 pending = run.openChallenges + rr.openSlotChallenges;
        if (pending != 0) revert Registry__ChallengesPending(taskId, pending);
        TrainingReceipt storage rc = _sealReceipt(run, taskId, _builder);

        uint256 n = _refundStakes(run, taskId);
        uint256 pool = run.poolLeft;
        uint256 dust = 0;
        if (run.totalCredits == 0) {
            // nobody earned anything: nothing to claim, the pool goes back at once
            (dust, pool) = (pool, 0);
            run.poolLeft = 0;
            _withdrawable[run.sponsor] += dust;
            emit PayoutCredited(taskId, run.sponsor, dust, 0);
        }
        run.distributedPool = pool;
        uint64 deadline = _openClaims(rr, taskId, n);
        emit RunSealed(taskId, rc.runRoot, rc.finalModelHash, rc.transcriptRoot, rc.rounds, rc.trainerCount, pool, dust);
        emit RootRunSealed(taskId, pool, deadline);
    }

    /// @inheritdoc ITrainingRegistryRounds
    function claim(bytes32 taskId, uint16 index, uint256 credits, bytes32[] calldata proof) external {
        Run storage run = _runEnded(taskId);
        address trainer = _checkCredits(taskId, run.enrolledCount, index, credits, proof);
        _markClaimed(taskId, index);
        uint256 reward = (run.distributedPool * _paidCredits(credits)) / run.totalCredits;
        uint256 left = run.poolLeft;
        if (reward > left) revert Registry__ClaimExceedsPool(reward, left);
        run.poolLeft = left - reward;
        _withdrawable[trainer] += reward;
        emit RewardClaimed(taskId, trainer, index, credits, reward);
    }

    /// @inheritdoc ITrainingRegistryRounds
    function sweep(bytes32 taskId) external {
        Run storage run = _runEnded(taskId);
        RootRun storage rr = _rootOf(taskId);
        if (block.timestamp <= rr.claimDeadline) revert Registry__ClaimPeriodOpen(taskId, rr.claimDeadline);
        uint256 left = run.poolLeft;
        run.poolLeft = 0;
        address sponsor = run.sponsor;
        _withdrawable[sponsor] += left;
        emit PoolSwept(taskId, sponsor, left);
    }

    /// @inheritdoc ITrainingRegistryRounds
    function commitProof(bytes32 commitment) external {
        if (_proofCommits[commitment] == 0) _proofCommits[commitment] = block.number;
    }

    /// @inheritdoc ITrainingRegistryRounds
    function proveAggregate(RoundClaim calldata a, RoundProofs.AggregateOpening calldata o, bytes[] calldata signatures)
        external
        nonReentrant
    {
        (Run storage run, RootRun storage rr, uint32 committed, bytes32 prevRoot) = _claimed(a);
        _checkSignatures(a.taskId, run.enrolledCount, o.entries, signatures);
        RoundProofs.AggregateContext memory ctx = RoundProofs.AggregateContext({
            taskId: a.taskId,
            round: a.round,
            fragmentsRoot: a.current.fragmentsRoot,
            prevFragmentsRoot: prevRoot,
            prevIsInitial: a.round == 0,
            fragmentCount: run.fragmentCount,
            slotWidth: RoundProofs.nextPow2(run.enrolledCount),
            fragmentSize: o.fragment < run.fragmentCount ? run.fragmentSizes[o.fragment] : 0,
            rule: run.aggregation,
            alphaBps: rr.alphaBps,
            lr: rr.lr,
            mu: rr.mu,
            nesterovOn: rr.nesterov
        });
        if (!_referee.aggregateMismatch(o, ctx)) revert Registry__NoMismatch(o.fragment, o.coordinate);
        _convict(run, rr, a, prevRoot, committed, Finding(1, o.fragment, o.coordinate, msg.sender));
    }

    /// @inheritdoc ITrainingRegistryRounds
    function proveBitmap(RoundClaim calldata a, BitmapOpening calldata b) external nonReentrant {
        (Run storage run, RootRun storage rr, uint32 committed, bytes32 prevRoot) = _claimed(a);
        _checkBitmapOpening(run, a, b);
        if (!_bitmapMismatch(b)) revert Registry__NoMismatch(b.fragment, b.index);
        _convict(run, rr, a, prevRoot, committed, Finding(2, b.fragment, b.index, msg.sender));
    }

    /// @inheritdoc ITrainingRegistryRounds
    function proveOmission(RoundClaim calldata a, uint256[] calldata bitmaps, uint16 fragment, uint16 index)
        external
        nonReentrant
    {
        (Run storage run, RootRun storage rr, uint32 committed, bytes32 prevRoot) = _claimed(a);
        _checkBitmaps(run, a, bitmaps);
        if (fragment >= run.fragmentCount) revert Registry__BadFragment(fragment, run.fragmentCount);
        // the round's submissions of the opening it was committed in (a discarded opening's are stale)
        uint256 states = _subsOf(a.taskId, a.round, _roundEpochs[a.taskId][a.round])[index];
        uint256 state = (states >> (2 * uint256(fragment))) & 3;
        if (state != ST_SUBMITTED || (bitmaps[index] >> fragment) & 1 == 1) {
            revert Registry__NoMismatch(fragment, index);
        }
        _convict(run, rr, a, prevRoot, committed, Finding(3, fragment, index, msg.sender));
    }

    /// @inheritdoc ITrainingRegistryRounds
    function challengeSlot(RoundClaim calldata a, uint256[] calldata bitmaps, uint16 fragment, uint16 index)
        external
        nonReentrant
    {
        (Run storage run, RootRun storage rr,,) = _claimed(a);
        _checkBitmaps(run, a, bitmaps);
        if (fragment >= run.fragmentCount || index >= bitmaps.length || (bitmaps[index] >> fragment) & 1 == 0) {
            revert Registry__NoSuchSubmission(a.taskId, a.round, fragment, _trainerAt(a.taskId, index));
        }
        SlotChallenge storage sc = _slotChallenges[a.taskId][a.round][_slotKey(index, fragment)];
        if (sc.challenger != address(0)) {
            revert Registry__ChallengePending(a.taskId, a.round, fragment, _trainerAt(a.taskId, index));
        }
        uint256 bond = _challengeBond(run);
        uint64 deadline = uint64(block.timestamp) + run.challengeSeconds;
        sc.challenger = msg.sender;
        sc.deadline = deadline;
        sc.commitment = _rootCommitments[a.taskId][a.round];
        sc.bond = bond;
        rr.openSlotChallenges += 1;
        _bondsHeld += bond;
        emit SlotChallenged(a.taskId, a.round, fragment, index, msg.sender, deadline, bond);
        _pullExact(msg.sender, bond);
    }

    /// @inheritdoc ITrainingRegistryRounds
    function answerSlot(
        bytes32 taskId,
        uint32 round,
        uint16 fragment,
        uint16 index,
        RoundRoots calldata roots,
        SlotAnswer calldata ans
    ) external nonReentrant {
        uint256 key = _slotKey(index, fragment);
        (Run storage run, SlotChallenge storage sc) = _pendingSlot(taskId, round, fragment, key);
        if (block.timestamp > sc.deadline) revert Registry__ChallengeDeadline(sc.deadline);
        if (_voided(taskId, round, fragment, key, sc)) return;
        if (_rootsHash(roots) != sc.commitment) revert Registry__WrongRoots(round);
        bytes32 structHash = _checkSlotAnswer(run, taskId, round, fragment, index, roots.fragmentsRoot, ans);
        _settleChallenge(taskId, round, key, msg.sender);
        _rounds[taskId][round].challengeStatus = RunRoot.STATUS_CHALLENGE_LOST; // the receipt shows it
        emit SlotAnswered(taskId, round, fragment, index, structHash, msg.sender);
    }

    /// @inheritdoc ITrainingRegistryRounds
    function expireSlot(RoundClaim calldata a, uint16 fragment, uint16 index) external nonReentrant {
        _expire(a, _slotKey(index, fragment), Finding(4, fragment, index, address(0)));
    }

    /// @inheritdoc ITrainingRegistryRounds
    function challengeWeights(bytes32 taskId, uint32 round, uint16 fragment, bool momentum, uint32 chunkIndex)
        external
        nonReentrant
    {
        Run storage run = _existing(taskId);
        RootRun storage rr = _rootOf(taskId);
        _checkWindow(run, taskId, round, _committedRounds(run, taskId));
        if (fragment >= run.fragmentCount) revert Registry__BadFragment(fragment, run.fragmentCount);
        if (chunkIndex >= (uint256(run.fragmentSizes[fragment]) + 15) / 16) revert Registry__BadOpening(chunkIndex);
        SlotChallenge storage sc = _slotChallenges[taskId][round][_weightsKey(fragment, momentum, chunkIndex)];
        if (sc.challenger != address(0)) revert Registry__ChallengePending(taskId, round, fragment, address(0));
        uint256 bond = _challengeBond(run);
        uint64 deadline = uint64(block.timestamp) + run.challengeSeconds;
        sc.challenger = msg.sender;
        sc.deadline = deadline;
        sc.commitment = _rootCommitments[taskId][round];
        sc.bond = bond;
        rr.openSlotChallenges += 1; // the seal and cancelStalledRun wait for it, as for a slot challenge
        _bondsHeld += bond;
        emit ITrainingRegistryEvidence.WeightsChallenged(taskId, round, fragment, momentum, chunkIndex, msg.sender, deadline, bond);
        _pullExact(msg.sender, bond);
    }

    /// @inheritdoc ITrainingRegistryRounds
    function expireWeights(RoundClaim calldata a, uint16 fragment, bool momentum, uint32 chunkIndex)
        external
        nonReentrant
    {
        uint256 position = momentum ? (uint256(1) << 32) | chunkIndex : chunkIndex;
        _expire(a, _weightsKey(fragment, momentum, chunkIndex), Finding(5, fragment, position, address(0)));
    }

    // ------------------------------------------------------------ views (ITrainingRegistryViews)

    /// @inheritdoc ITrainingRegistryViews
    function listRuns(uint256 offset, uint256 limit) external view returns (bytes32[] memory taskIds, uint256 total) {
        total = _runIds.length;
        uint256 end = offset >= total ? offset : (limit > total - offset ? total : offset + limit);
        taskIds = new bytes32[](end - offset);
        for (uint256 i = offset; i < end; ++i) {
            taskIds[i - offset] = _runIds[i];
        }
    }

    /// @inheritdoc ITrainingRegistryViews
    function trainerMetrics(bytes32 taskId, address trainer) external view returns (TrainerMetrics memory m) {
        Run storage run = _existing(taskId);
        Trainer storage t = _trainers[taskId][trainer];
        m.trainer = trainer;
        m.index = t.index;
        m.enrolled = t.enrolled;
        if (t.enrolled && run.status == RunStatus.Training) {
            // the open round's on-chain (forced) submissions
            uint256 states = _subsOf(taskId, run.currentRound, run.epoch)[t.index];
            m.submitted = uint32(_countNonZero(states, run.fragmentCount));
        }
        m.stake = t.stake;
        m.slashed = t.slashed;
        m.did = _dids[taskId][trainer];
    }

    /// @inheritdoc ITrainingRegistryViews
    function submissionsOf(bytes32 taskId, uint32 round, address trainer)
        external
        view
        returns (uint256 submitted, uint256 rejected)
    {
        Run storage run = _existing(taskId);
        Trainer storage t = _trainers[taskId][trainer];
        if (!t.enrolled) return (0, 0);
        // a committed round's submissions are those of the opening it was committed in
        uint16 epoch = round < _roundsFinalized(run) ? _roundEpochs[taskId][round] : run.epoch;
        uint256 states = _subsOf(taskId, round, epoch)[t.index];
        uint256 f = run.fragmentCount;
        for (uint256 i = 0; i < f; ++i) {
            uint256 s = (states >> (2 * i)) & 3;
            // forge-lint: disable-next-line(incorrect-shift) -- bit i of the result bitmap, as intended
            if (s != 0) submitted |= 1 << i;
            // forge-lint: disable-next-line(incorrect-shift) -- bit i of the result bitmap, as intended
            if (s == ST_REJECTED) rejected |= 1 << i;
        }
    }

    /// @inheritdoc ITrainingRegistryViews
    function syncerWeight(address account) external view returns (uint256 weight, uint256 changeableFromBlock) {
        SyncerEntry storage s = _syncers[account];
        return (s.weight, _changeableFrom(s));
    }

    /// @inheritdoc ITrainingRegistryRounds
    function outerRule(bytes32 taskId)
        external
        view
        returns (OuterRule memory outer, address committer, uint32 committerFrom)
    {
        RootRun storage rr = _rootRuns[taskId];
        outer = OuterRule({lr: rr.lr, mu: rr.mu, nesterov: rr.nesterov, alphaBps: rr.alphaBps});
        return (outer, rr.committer, rr.committerFrom);
    }

    /// @inheritdoc ITrainingRegistryRounds
    function rootState(bytes32 taskId)
        external
        view
        returns (bool enabled, bytes32 initialFragmentsRoot, bytes32 creditsRoot, uint64 claimDeadline)
    {
        RootRun storage rr = _rootRuns[taskId];
        return (rr.enabled, rr.initialFragmentsRoot, rr.creditsRoot, rr.claimDeadline);
    }

    /// @inheritdoc ITrainingRegistryRounds
    function roundCommitment(bytes32 taskId, uint32 round) external view returns (bytes32) {
        return _rootCommitments[taskId][round];
    }

    /// @inheritdoc ITrainingRegistryRounds
    function commitPhase(bytes32 taskId) external view returns (uint64 closes, uint16 unrevealed) {
        Run storage run = _runIn(taskId, RunStatus.Training);
        return (_commitDeadline(run), _rootOf(taskId).unrevealed);
    }

    /// @inheritdoc ITrainingRegistryRounds
    function claimed(bytes32 taskId, uint16 index) external view returns (bool) {
        return _claimedBits[taskId][index / CLAIM_BITS] & (uint256(1) << (index % CLAIM_BITS)) != 0;
    }

    /// @dev The trainer at `index`, whose credits leaf `credits` the proof opens in the run's
    /// final credits root; reverts Registry__BadCreditProof, Registry__NotRootFlow.
    function _checkCredits(bytes32 taskId, uint16 enrolled, uint16 index, uint256 credits, bytes32[] calldata proof)
        private
        view
        returns (address trainer)
    {
        bytes32 root = _rootOf(taskId).creditsRoot;
        if (index >= enrolled) revert Registry__BadCreditProof(index);
        trainer = _trainerList[taskId][index];
        if (!RoundProofs.verifyPath(root, _creditLeaf(index, credits), index, proof, RoundProofs.nextPow2(enrolled))) {
            revert Registry__BadCreditProof(index);
        }
    }

    /// @dev What a credits word pays: its endorsed credits e (low 128 bits) plus its unendorsed u
    /// (high 128 bits) up to e, e + min(u, e) (PROTOCOL.md §5 "Endorsed credit").
    function _paidCredits(uint256 credits) private pure returns (uint256) {
        uint256 e = credits & type(uint128).max;
        uint256 u = credits >> 128;
        return e + (u < e ? u : e);
    }

    /// @dev Sets trainer `index`'s claimed bit (bit index % 255 of word index / 255; bit 255 is
    /// the seal's sentinel); reverts Registry__AlreadyClaimed.
    function _markClaimed(bytes32 taskId, uint16 index) private {
        mapping(uint256 => uint256) storage bits = _claimedBits[taskId];
        uint256 w = index / CLAIM_BITS;
        uint256 word = bits[w];
        uint256 bit = uint256(1) << (index % CLAIM_BITS);
        if (word & bit != 0) revert Registry__AlreadyClaimed(taskId, index);
        bits[w] = word | bit;
    }

    /// @dev An unanswered slot or weights challenge (`key` in _slotChallenges) after its deadline:
    /// void if its round was discarded meanwhile, else the round is proven wrong (`what`, the
    /// challenger gets its bond back and the bounty).
    function _expire(RoundClaim calldata a, uint256 key, Finding memory what) private {
        (Run storage run, SlotChallenge storage sc) = _pendingSlot(a.taskId, a.round, what.fragment, key);
        if (block.timestamp <= sc.deadline) revert Registry__ChallengeDeadline(sc.deadline);
        if (_voided(a.taskId, a.round, what.fragment, key, sc)) return;
        RootRun storage rr = _rootRuns[a.taskId];
        bytes32 prevRoot = _checkRoots(rr, a);
        what.prover = sc.challenger;
        _settleChallenge(a.taskId, a.round, key, what.prover);
        _convict(run, rr, a, prevRoot, _committedRounds(run, a.taskId), what);
    }

    /// @dev The run and the pending challenge `key` of (round, fragment) (a slot key, or a weights
    /// key: bit 255); reverts Registry__NoChallenge (naming the slot's trainer, address(0) for weights).
    function _pendingSlot(bytes32 taskId, uint32 round, uint16 fragment, uint256 key)
        private
        view
        returns (Run storage run, SlotChallenge storage sc)
    {
        run = _existing(taskId);
        sc = _slotChallenges[taskId][round][key];
        if (sc.challenger == address(0)) {
            // forge-lint: disable-next-line(unsafe-typecast) -- a slot key is index << 8 | fragment, index < 2^16
            revert Registry__NoChallenge(
                taskId, round, fragment, key >> 255 == 0 ? _trainerAt(taskId, uint16(key >> 8)) : address(0)
            );
        }
    }

    /// @dev The trainer at enrollment index `index`, or address(0) past the enrolled ones.
    function _trainerAt(bytes32 taskId, uint16 index) private view returns (address) {
        address[] storage list = _trainerList[taskId];
        return index < list.length ? list[index] : address(0);
    }

    /// @dev A challenge whose round was discarded (or discarded and committed again) is void: the
    /// bond goes back to its challenger. Returns whether it was. The event names the slot's
    /// trainer index, 65535 for a weights or momentum chunk challenge.
    function _voided(bytes32 taskId, uint32 round, uint16 fragment, uint256 key, SlotChallenge storage sc)
        private
        returns (bool)
    {
        if (round < _roundsFinalized(_runs[taskId]) && _rootCommitments[taskId][round] == sc.commitment) {
            return false;
        }
        _settleChallenge(taskId, round, key, sc.challenger);
        // forge-lint: disable-next-line(unsafe-typecast) -- a slot key is index << 8 | fragment, index < 2^16
        emit SlotChallengeVoided(taskId, round, fragment, key >> 255 == 0 ? uint16(key >> 8) : type(uint16).max);
        return true;
    }

    /// @dev The answer opens trainer `index`'s slot of `fragment` in the round's fragments root with
    /// a struct its trainer signed; returns the struct hash. Reverts Registry__BadLeaf,
    /// Registry__NotSignedBy.
    function _checkSlotAnswer(
        Run storage run,
        bytes32 taskId,
        uint32 round,
        uint16 fragment,
        uint16 index,
        bytes32 fragmentsRoot,
        SlotAnswer calldata ans
    ) private view returns (bytes32 structHash) {
        structHash = RoundProofs.structHashOfCidHash(
            taskId, round, fragment, ans.baseRoot, ans.payloadRoot, ans.payloadSumsq, ans.cidHash, ans.payloadHash
        );
        _requireSlot(
            run,
            fragmentsRoot,
            fragment,
            index,
            ans.leaf,
            ans.leafPath,
            RoundProofs.slotLeaf(index, structHash),
            ans.slotPath
        );
        _requireSignedBy(structHash, ans.signature, _trainerList[taskId][index]);
    }

    /// @dev The opening's bitmaps are the round's committed ones (Registry__WrongRoots), its fragment
    /// leaf is at its position in the round's fragments root and its slot at trainer `index` in the
    /// leaf's accepted set (Registry__BadLeaf).
    function _checkBitmapOpening(Run storage run, RoundClaim calldata a, BitmapOpening calldata b) private view {
        _checkBitmaps(run, a, b.bitmaps);
        if (b.fragment >= run.fragmentCount || b.index >= run.enrolledCount) {
            revert Registry__BadLeaf(b.fragment, b.index);
        }
        _requireSlot(run, a.current.fragmentsRoot, b.fragment, b.index, b.leaf, b.leafPath, b.slot, b.slotPath);
    }

    /// @dev `leaf` is fragment `fragment`'s leaf in `fragmentsRoot` and `slot` the value at
    /// trainer `index` in its accepted set; reverts Registry__BadLeaf.
    function _requireSlot(
        Run storage run,
        bytes32 fragmentsRoot,
        uint16 fragment,
        uint16 index,
        RoundProofs.FragmentLeaf calldata leaf,
        bytes32[] calldata leafPath,
        bytes32 slot,
        bytes32[] calldata slotPath
    ) private view {
        if (
            !RoundProofs.verifyPath(
                    fragmentsRoot, _leafHash(leaf), fragment, leafPath, RoundProofs.nextPow2(run.fragmentCount)
                )
                || !RoundProofs.verifyPath(
                    leaf.acceptedRoot, slot, index, slotPath, RoundProofs.nextPow2(run.enrolledCount)
                )
        ) revert Registry__BadLeaf(fragment, index);
    }

    /// @dev `bitmaps` are the claimed round's committed ones (one per enrolled trainer, hashed as
    /// commitRound hashes them); reverts Registry__WrongRoots.
    function _checkBitmaps(Run storage run, RoundClaim calldata a, uint256[] calldata bitmaps) private view {
        if (bitmaps.length != run.enrolledCount || keccak256(abi.encodePacked(bitmaps)) != a.current.bitmapsHash) {
            revert Registry__WrongRoots(a.round);
        }
    }

    /// @dev The run a proof is about (in the root flow), its committed round count, and, the
    /// round's window and roots checked, the previous fragments root.
    function _claimed(RoundClaim calldata a)
        private
        view
        returns (Run storage run, RootRun storage rr, uint32 committed, bytes32 prevRoot)
    {
        run = _existing(a.taskId);
        rr = _rootOf(a.taskId);
        committed = _committedRounds(run, a.taskId);
        _checkWindow(run, a.taskId, a.round, committed);
        prevRoot = _checkRoots(rr, a);
    }

    /// @dev The hash of a fragment leaf given in calldata (RoundProofs.fragmentLeaf).
    function _leafHash(RoundProofs.FragmentLeaf calldata l) private pure returns (bytes32) {
        return RoundProofs.fragmentLeaf(l);
    }

    /// @dev Whether the bitmaps contradict the fragment's leaf: the leaf names another fragment,
    /// its acceptedCount is not the number of bitmaps with bit `fragment`, or trainer `index`'s slot
    /// is filled and its bit clear or the reverse.
    function _bitmapMismatch(BitmapOpening calldata b) private pure returns (bool) {
        if (b.leaf.fragment != b.fragment) return true;
        uint256 count = 0;
        for (uint256 i = 0; i < b.bitmaps.length; ++i) {
            count += (b.bitmaps[i] >> b.fragment) & 1;
        }
        bool bit = (b.bitmaps[b.index] >> b.fragment) & 1 == 1;
        return count != b.leaf.acceptedCount || bit != (b.slot != bytes32(0));
    }

    /// @dev What a proof showed: `kind` 1 (aggregate: fragment, coordinate), 2 (bitmap:
    /// fragment, trainer index), 3 (omission: fragment, trainer index), 4 (slot preimage not
    /// shown: fragment, trainer index) or 5 (weights or momentum chunk not opened: fragment, chunk
    /// index, 2^32 | chunk index for momentum); `prover` gets the bounty (kinds 1 to 3: the proof's
    /// sender, only when it committed to the proof; else address(0), the bounty burned).
    struct Finding {
        uint8 kind;
        uint16 fragment;
        uint256 position;
        address prover;
    }

    /// @dev A proven-wrong round: the committer's fees and bond (`_slashCommitter`), the rewind,
    /// the event.
    function _convict(
        Run storage run,
        RootRun storage rr,
        RoundClaim calldata a,
        bytes32 prevRoot,
        uint32 committed,
        Finding memory what
    ) private {
        if (what.kind < 4) what.prover = _committedProver(what.prover); // a proof's sender (PROTOCOL.md §5 "Bounties")
        (address syncer, uint256 slashed, uint256 bounty) =
            _slashCommitter(run, rr, a.taskId, a.round, committed, what.prover);
        _rewind(run, rr, a, prevRoot, committed);
        _emitProven(a.taskId, a.round, what, syncer, slashed, bounty);
    }

    /// @dev RoundProvenWrong (its own function: the IR pipeline runs out of stack slots otherwise).
    function _emitProven(
        bytes32 taskId,
        uint32 round,
        Finding memory what,
        address syncer,
        uint256 slashed,
        uint256 bounty
    ) private {
        emit RoundProvenWrong(
            taskId, round, what.kind, what.fragment, what.position, what.prover, syncer, slashed, bounty
        );
    }

    /// @dev keccak256 of a round's roots: the word commitRound stores.
    function _rootsHash(RoundRoots calldata x) private pure returns (bytes32) {
        return keccak256(abi.encodePacked(x.fragmentsRoot, x.creditsRoot, x.totalCredits, x.bitmapsHash));
    }

    /// @dev The claim's roots (and the previous round's roots and weights root) are the committed
    /// ones (Registry__WrongRoots); returns the previous fragments root (the initial one for round 0).
    function _checkRoots(RootRun storage rr, RoundClaim calldata a) private view returns (bytes32 prevRoot) {
        uint32 r = a.round;
        mapping(uint32 => RoundRecord) storage recs = _rounds[a.taskId];
        mapping(uint32 => bytes32) storage words = _rootCommitments[a.taskId];
        if (_rootsHash(a.current) != words[r]) revert Registry__WrongRoots(r);
        if (r == 0) return rr.initialFragmentsRoot;
        RoundRecord storage p = recs[r - 1];
        if (
            _rootsHash(a.previous) != words[r - 1]
                || RunRoot.roundDigest(r - 1, a.previousWeightsRoot, p.transcriptHash, p.acceptedCount) != p.roundDigest
        ) revert Registry__WrongRoots(r - 1);
        return a.previous.fragmentsRoot;
    }

    /// @dev Each accepted entry's trainer (by enrollment index) signed its struct hash (EIP-712,
    /// this registry's domain); reverts Registry__SignatureCount, Registry__NotSignedBy.
    function _checkSignatures(
        bytes32 taskId,
        uint16 enrolled,
        RoundProofs.AcceptedEntry[] calldata entries,
        bytes[] calldata signatures
    ) private view {
        uint256 k = entries.length;
        if (signatures.length != k) revert Registry__SignatureCount(signatures.length, k);
        address[] storage list = _trainerList[taskId];
        for (uint256 i = 0; i < k; ++i) {
            uint16 index = entries[i].trainerIndex;
            // no signature recovers to address(0): an index past the enrolled trainers fails
            _requireSignedBy(entries[i].structHash, signatures[i], index < enrolled ? list[index] : address(0));
        }
    }

    /// @dev A new committer (the first, a replacement, or the first after a rewind, which sets
    /// committerFrom itself): the previous one's span goes to _committerSpans and the new one's
    /// rounds start at `round` (round 0's default needs no write).
    function _newCommitter(RootRun storage rr, bytes32 taskId, uint32 round) private {
        address before = rr.committer;
        if (before != address(0)) {
            uint32 k = rr.pastCommitters;
            _committerSpans[taskId][k] = (uint256(rr.committerFrom) << 160) | uint160(before);
            rr.pastCommitters = k + 1;
        }
        rr.committer = msg.sender;
        if (round != 0) rr.committerFrom = round;
    }

    /// @dev The committer of the proven round r (PROTOCOL.md §5 "Rewind"): every discarded round's
    /// fee (rounds r .. committed - 1) comes back to the pool from the committer it was paid to;
    /// if round r's committer is still the run's syncer its bond is slashed (BOUNTY_BPS to
    /// `prover`, the rest burned; all burned when `prover` is address(0)) and the run has no syncer until an election. A committer already
    /// replaced lost its bond then; a later committer of the discarded rounds keeps its bond and
    /// its place. Returns round r's committer, the bond slashed and the bounty, atto-units.
    function _slashCommitter(
        Run storage run,
        RootRun storage rr,
        bytes32 taskId,
        uint32 r,
        uint32 committed,
        address prover
    ) private returns (address syncer, uint256 slashed, uint256 bounty) {
        syncer = _refundDiscarded(run, rr, taskId, r, committed);
        if (syncer == address(0) || syncer != run.syncer) return (syncer, 0, 0);
        slashed = _forfeitBond(run, syncer);
        bounty = prover == address(0) ? 0 : (slashed * BOUNTY_BPS) / BPS;
        _withdrawable[prover] += bounty;
        _burn(taskId, syncer, slashed - bounty);
        run.syncer = address(0);
        run.electionBlock = 0;
    }

    /// @dev Takes back the fee of each round r .. committed - 1 from the committer it was paid to
    /// (walking the committers' spans from the last one back) and drops the spans that start at
    /// or after r; the current committer's span, if it started before r, joins the past ones (the
    /// rewind clears `committer`). Returns round r's committer (address(0) if none is recorded).
    function _refundDiscarded(Run storage run, RootRun storage rr, bytes32 taskId, uint32 r, uint32 committed)
        private
        returns (address guilty)
    {
        uint256 fee = _syncerFeePerRound(run);
        mapping(uint256 => uint256) storage spans = _committerSpans[taskId];
        mapping(address => uint256) storage fees = _syncerFees[taskId];
        uint256 end = committed;
        uint256 back = 0;
        address who = rr.committer;
        uint256 from = rr.committerFrom;
        uint32 k = rr.pastCommitters;
        if (who != address(0)) {
            // the current span, rounds committerFrom .. committed - 1 (committed > r: _checkWindow)
            uint256 start = from > r ? from : r;
            fees[who] -= fee * (end - start);
            back += fee * (end - start);
            if (from <= r) {
                guilty = who;
                // it keeps rounds from .. r - 1: that span joins the past ones
                if (from < r) {
                    spans[k] = (from << 160) | uint160(who);
                    k += 1;
                }
            }
            end = start;
        }
        // the past spans, last first, while they hold discarded rounds (each wholly or in part)
        while (end > r && k != 0) {
            uint256 span = spans[k - 1];
            who = address(uint160(span));
            from = span >> 160;
            uint256 start = from > r ? from : r;
            // the span's discarded rounds are start .. end - 1, each paid `fee` to `who`
            fees[who] -= fee * (end - start);
            back += fee * (end - start);
            if (from <= r) guilty = who;
            if (from >= r) k -= 1; // wholly discarded
            end = start;
        }
        rr.pastCommitters = k;
        run.poolLeft += back;
    }

    /// @dev Discards rounds a.round .. committed - 1: the run's fragments and credits roots, total
    /// credits and weights go back to round a.round - 1's (the initial state for round 0) and
    /// round a.round opens again.
    function _rewind(Run storage run, RootRun storage rr, RoundClaim calldata a, bytes32 prevRoot, uint32 committed)
        private
    {
        uint32 r = a.round;
        bool initial = r == 0;
        rr.creditsRoot = initial ? bytes32(0) : a.previous.creditsRoot;
        run.totalCredits = initial ? 0 : a.previous.totalCredits;
        run.weightsRoot = initial ? run.initialWeightsRoot : a.previousWeightsRoot;
        rr.committer = address(0);
        rr.committerFrom = r;
        rr.unrevealed = 0; // the reopened round is a new opening: earlier commitments cannot be revealed
        run.epoch += 1; // and its submissions start empty (`_subsOf`), the discarded openings' kept apart
        _openRound(run, a.taskId, r);
        emit RoundsDiscarded(a.taskId, r, committed);
    }

    /// @dev RoundCommitted of `c` (its own function: the legacy pipeline runs out of stack slots
    /// in commitRound otherwise).
    function _emitCommitted(RootCommit calldata c, bytes32 weightsRoot, bytes32 creditsRoot, uint256 total) private {
        emit RoundCommitted(
            c.taskId,
            c.round,
            c.fragmentsRoot,
            weightsRoot,
            creditsRoot,
            total,
            c.acceptedBitmaps,
            c.unendorsedBitmaps,
            c.transcriptHash,
            c.transcriptCid
        );
    }

    /// @dev Trainer `index`'s credits leaf: keccak256(0x04 ‖ uint16 index ‖ uint256 credits).
    function _creditLeaf(uint16 index, uint256 credits) private pure returns (bytes32 h) {
        // 0x04 ‖ uint16 index ‖ uint256 credits: 35 bytes in the scratch space (0x00..0x3f)
        assembly ("memory-safe") {
            mstore(0x00, or(shl(248, 0x04), shl(232, index)))
            mstore(0x03, credits)
            h := keccak256(0x00, 35)
        }
    }

    /// @dev The root of the positional tree over `leaves` (its length a power of two; the leaves
    /// are overwritten): node keccak256(left ‖ right), hashed in the scratch space.
    function _root(bytes32[] memory leaves) private pure returns (bytes32 root) {
        assembly ("memory-safe") {
            let base := add(leaves, 0x20)
            for { let w := mload(leaves) } gt(w, 1) {} {
                w := shr(1, w)
                for { let i := 0 } lt(i, w) { i := add(i, 1) } {
                    let pair := add(base, shl(6, i))
                    mstore(0x00, mload(pair))
                    mstore(0x20, mload(add(pair, 0x20)))
                    mstore(add(base, shl(5, i)), keccak256(0x00, 0x40))
                }
            }
            root := mload(base)
        }
    }

    /// @dev Checks the commit's lengths and bitmaps and that `previousCredits` is the vector behind
    /// `committedRoot` (bytes32(0): all zero, before round 0); adds each accepted fragment's size
    /// to its trainer; checks the quorum per fragment before the deadline. Returns the new credits
    /// root, the new cumulative total and the round's accepted (trainer, fragment) count.
    function _credit(Run storage run, bytes32 committedRoot, RootCommit calldata c)
        private
        view
        returns (bytes32 creditsRoot, uint256 total, uint32 accepted)
    {
        uint16 m = run.enrolledCount;
        if (
            c.acceptedBitmaps.length != m || c.previousCredits.length != m
                || c.fragmentHashes.length != run.fragmentCount
        ) {
            revert Registry__CommitLength(
                c.acceptedBitmaps.length, c.previousCredits.length, c.fragmentHashes.length, m, run.fragmentCount
            );
        }
        uint256 unendorsed = c.unendorsedBitmaps.length;
        if (unendorsed != 0 && unendorsed != m) revert Registry__UnendorsedLength(unendorsed, m);
        bytes32 before;
        uint256[] memory counts;
        (before, creditsRoot, total, counts) = _sum(_sizes(run), c, committedRoot == bytes32(0));
        if (committedRoot != bytes32(0) && before != committedRoot) {
            revert Registry__WrongPreviousCredits(before, committedRoot);
        }
        accepted = _quorum(run, counts);
        total += run.totalCredits;
    }

    /// @dev The run's fragment sizes, in memory.
    function _sizes(Run storage run) private view returns (uint256[] memory sizes) {
        uint256 f = run.fragmentCount;
        sizes = new uint256[](f);
        for (uint256 j = 0; j < f; ++j) {
            sizes[j] = run.fragmentSizes[j];
        }
    }

    /// @dev The credits roots before and after the round, the credits added and the count of
    /// accepted trainers per fragment: trainer i gains sizes[j] for each bit j of its bitmap, in
    /// the high 128 bits of its credits word when bit j of its unendorsed bitmap is set, else in
    /// the low (the added total counts both). With `zero` every previous credit must be 0 (and the
    /// root before is not computed). Reverts Registry__BadBitmap for unendorsed bits outside the
    /// accepted bitmap.
    function _sum(uint256[] memory sizes, RootCommit calldata c, bool zero)
        private
        pure
        returns (bytes32 beforeRoot, bytes32 nextRoot, uint256 added, uint256[] memory counts)
    {
        uint256 m = c.acceptedBitmaps.length;
        counts = new uint256[](sizes.length);
        bytes32[] memory before = new bytes32[](RoundProofs.nextPow2(m));
        bytes32[] memory next = new bytes32[](before.length);
        for (uint256 i = 0; i < m; ++i) {
            uint256 credits = c.previousCredits[i];
            if (zero && credits != 0) revert Registry__WrongPreviousCredits(bytes32(credits), bytes32(0));
            // forge-lint: disable-next-line(unsafe-typecast) -- i < enrolled <= MAX_TRAINERS
            uint256 gain = _gains(uint16(i), c, sizes, counts);
            // forge-lint: disable-next-line(unsafe-typecast) -- i < enrolled <= MAX_TRAINERS
            before[i] = _creditLeaf(uint16(i), credits);
            // forge-lint: disable-next-line(unsafe-typecast) -- i < enrolled <= MAX_TRAINERS
            next[i] = _creditLeaf(uint16(i), credits + gain);
            added += (gain & type(uint128).max) + (gain >> 128);
        }
        beforeRoot = zero ? bytes32(0) : _root(before);
        nextRoot = _root(next);
    }

    /// @dev Trainer `index`'s gain of commit `c` as a credits word: `_gain` of its accepted bits
    /// outside its unendorsed bitmap in the low 128 bits, of those inside it in the high 128 (both
    /// counted into counts alike).
    function _gains(uint16 index, RootCommit calldata c, uint256[] memory sizes, uint256[] memory counts)
        private
        pure
        returns (uint256 gain)
    {
        uint256 bits = c.acceptedBitmaps[index];
        uint256 u = c.unendorsedBitmaps.length == 0 ? 0 : c.unendorsedBitmaps[index];
        if (u & ~bits != 0) revert Registry__BadBitmap(index, u);
        gain = _gain(index, bits & ~u, sizes, counts);
        if (u != 0) gain += _gain(index, u, sizes, counts) << 128;
    }

    /// @dev The credits one bitmap earns (sum of sizes[j] over its bits j), counting each bit
    /// into counts[j]; reverts Registry__BadBitmap for a bit at or beyond sizes.length.
    function _gain(uint16 index, uint256 bits, uint256[] memory sizes, uint256[] memory counts)
        private
        pure
        returns (uint256 gain)
    {
        if (bits >> sizes.length != 0) revert Registry__BadBitmap(index, bits);
        // bits < 2^F and F = sizes.length = counts.length: every index read is in bounds; a sum
        // of at most 128 sizes below 2^64 cannot overflow
        assembly ("memory-safe") {
            let s := add(sizes, 0x20)
            let c := add(counts, 0x20)
            for { let j := 0 } bits { j := add(j, 1) } {
                if and(bits, 1) {
                    gain := add(gain, mload(add(s, shl(5, j))))
                    let p := add(c, shl(5, j))
                    mstore(p, add(mload(p), 1))
                }
                bits := shr(1, bits)
            }
        }
    }

    /// @dev Before the deadline every fragment needs the quorum K; returns the accepted total.
    function _quorum(Run storage run, uint256[] memory counts) private view returns (uint32 accepted) {
        bool early = block.timestamp <= run.roundDeadline;
        uint16 quorum = run.quorum;
        for (uint256 j = 0; j < counts.length; ++j) {
            // forge-lint: disable-next-line(unsafe-typecast) -- j < F and counts[j] <= M <= MAX_TRAINERS
            if (early && counts[j] < quorum) revert Registry__QuorumNotMet(uint16(j), uint16(counts[j]), quorum);
            // forge-lint: disable-next-line(unsafe-typecast) -- the sum is <= M * F <= MAX_SUBMISSION_SLOTS
            accepted += uint32(counts[j]);
        }
    }

    /// @dev Number of fragments (of `f`) whose two state bits are not zero.
    function _countNonZero(uint256 states, uint256 f) private pure returns (uint256 count) {
        for (uint256 j = 0; j < f; ++j) {
            if ((states >> (2 * j)) & 3 != 0) ++count;
        }
    }
}
