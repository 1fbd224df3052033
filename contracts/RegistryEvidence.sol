// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/IERC20Permit.sol";
import {ITrainingRegistryEvidence} from "./interfaces/ITrainingRegistryEvidence.sol";
import {ITrainingRegistryPermit} from "./interfaces/ITrainingRegistryPermit.sol";
import {ITrainingRegistryRounds} from "./interfaces/ITrainingRegistryRounds.sol";
import {RegistryStorage} from "./RegistryStorage.sol";
import {EvidenceVerifier} from "./EvidenceVerifier.sol";
import {RunRoot} from "./lib/RunRoot.sol";
import {RoundProofs} from "./lib/RoundProofs.sol";

/// @title RegistryEvidence
/// @notice The evidence functions of the training registry (contracts/PROTOCOL.md §4): proven
/// invalid payloads and availability challenges; the root flow's forced submissions, committed
/// and then revealed (§5, commit–reveal); cancelTask and cancelStalledRun (moved here to keep the registry
/// under EIP-170); and postTask / enrollTrainer with an ERC-2612
/// permit (ITrainingRegistryPermit), which share their logic with the registry's own through
/// RegistryStorage._postTask / _enrollTrainer. Deployed before the registry (its code in the
/// registry's init code would put that over EIP-3860's 49,152 bytes) and passed to the registry's
/// constructor, which checks its parameters and delegatecalls every selector it does not know to
/// it, so these functions run
/// on the registry's storage, at the registry's address (events come from the registry; the
/// EIP-712 domain is the registry's). Called directly, it has no runs and every call reverts.
/// Split off to keep the registry under the 24,576-byte EIP-170 limit.
contract RegistryEvidence is RegistryStorage, ITrainingRegistryEvidence, ITrainingRegistryPermit {
    /// @dev Stateless chunk and norm checks.
    EvidenceVerifier private immutable _evidence;

    /// @dev The root-flow functions' code (RegistryRounds), delegatecalled by the fallback.
    address private immutable _roundsModule;

    /// @dev The registry's minSyncerStake and syncerTimeout (cancelStalledRun), copied from it.
    uint256 private immutable _minSyncerStake;
    uint32 private immutable _syncerTimeout;

    /// @param token_ the registry's ERC-20 (bonds are pulled in it)
    /// @param minSyncerFeePerRound_ the registry's minimum syncer pay per round, atto-units
    /// @param rounds_ the registry's RegistryRounds module, deployed beforehand with the same token
    /// and minimum fee; reverts Registry__ZeroAddress when it has no code, Registry__ModuleMismatch
    /// when its roundsModuleConfig() differs
    /// @param minSyncerStake_ the registry's minimum syncer pool stake for election, atto-units
    /// @param syncerTimeout_ the registry's syncer timeout, seconds
    constructor(
        IERC20 token_,
        uint256 minSyncerFeePerRound_,
        address rounds_,
        uint256 minSyncerStake_,
        uint32 syncerTimeout_
    ) RegistryStorage(token_, minSyncerFeePerRound_) {
        _requireModule(
            rounds_,
            abi.encodeCall(ITrainingRegistryRounds.roundsModuleConfig, ()),
            abi.encode(token_, minSyncerFeePerRound_)
        );
        _evidence = new EvidenceVerifier();
        _roundsModule = rounds_;
        _minSyncerStake = minSyncerStake_;
        _syncerTimeout = syncerTimeout_;
    }

    /// @notice Every selector not defined here or in TrainingRegistry (ITrainingRegistryRounds)
    /// runs in RegistryRounds' code, still on the registry's storage (this code itself runs by
    /// the registry's delegatecall); an unknown selector reverts there.
    fallback() external {
        _delegate(_roundsModule);
    }

    /// @inheritdoc ITrainingRegistryEvidence
    function evidenceModuleConfig()
        external
        view
        returns (address token, uint256 minSyncerFeePerRound, uint256 minSyncerStake, uint32 syncerTimeout)
    {
        return (address(_token), _minSyncerFeePerRound, _minSyncerStake, _syncerTimeout);
    }

    // ------------------------------------------------------------ forced submissions (root flow)

    /// @inheritdoc ITrainingRegistryEvidence
    function commitSubmission(bytes32 taskId, uint32 round, uint16 fragment, bytes32 commitment) external {
        Run storage run = _checkSubmissionWindow(taskId, round, fragment);
        RootRun storage rr = _rootOf(taskId);
        uint64 closes = _commitDeadline(run);
        if (block.timestamp > closes) revert Registry__CommitPhaseOver(taskId, round, closes);
        if (commitment == bytes32(0)) revert Registry__NotCommitted(taskId, round, fragment, msg.sender);
        Trainer storage t = _activeTrainer(taskId, msg.sender);
        uint64 openedAt = run.roundOpenedAt;
        mapping(uint256 => bytes32) storage slots = _forcedCommitments[taskId][round][openedAt];
        uint256 key = _slotKey(t.index, fragment);
        if (slots[key] == bytes32(0)) {
            // a new commitment of this opening: one more the early commit waits for
            rr.unrevealed += 1;
        }
        slots[key] = commitment; // a trainer may replace its commitment until the phase closes
        emit SubmissionCommitted(taskId, round, fragment, msg.sender, commitment);
    }

    /// @inheritdoc ITrainingRegistryEvidence
    function submitOuterGradient(bytes32 taskId, uint32 round, uint16 fragment, SignedPayload calldata s) external {
        Run storage run = _checkSubmissionWindow(taskId, round, fragment);
        RootRun storage rr = _rootOf(taskId);
        uint64 closes = _commitDeadline(run);
        if (block.timestamp <= closes) revert Registry__CommitPhaseOpen(taskId, round, closes);
        bytes32 sh = _structHash(taskId, round, fragment, run.weightsRoot, s);
        address trainer = _signerOf(sh, s.signature);
        if (trainer == address(0)) revert Registry__InvalidSignature();
        uint256 index = _recordSubmission(taskId, round, fragment, trainer);
        mapping(uint256 => bytes32) storage slots = _forcedCommitments[taskId][round][run.roundOpenedAt];
        uint256 key = _slotKey(index, fragment);
        if (slots[key] != keccak256(abi.encode(sh, trainer))) {
            revert Registry__NotCommitted(taskId, round, fragment, trainer);
        }
        delete slots[key]; // revealed: nothing left for slashUnrevealed
        // the commitment is of this opening, so it was counted (commitRound and the rewind reset the count)
        rr.unrevealed -= 1;
        _emitSubmitted(taskId, round, fragment, trainer, s);
    }

    /// @inheritdoc ITrainingRegistryEvidence
    function slashUnrevealed(bytes32 taskId, uint32 round, uint16 fragment, address trainer) external {
        Run storage run = _existing(taskId);
        _checkWindow(run, taskId, round, _committedRounds(run, taskId));
        // the opening the round was committed in ran its reveal phase whole (an early commit waits
        // for every reveal; a later one comes after the deadline); a rewind's cut opening is not it
        mapping(uint256 => bytes32) storage slots = _forcedCommitments[taskId][round][_rounds[taskId][round].openedAt];
        Trainer storage t = _trainers[taskId][trainer];
        uint256 key = _slotKey(t.index, fragment);
        if (!t.enrolled || slots[key] == bytes32(0)) revert Registry__NotCommitted(taskId, round, fragment, trainer);
        delete slots[key];
        _burn(taskId, trainer, _slashStake(run, taskId, trainer, round, fragment, SlashReason.Unrevealed));
    }

    // ------------------------------------------------------------ weights availability (root flow)

    /// @inheritdoc ITrainingRegistryEvidence
    function answerWeights(
        bytes32 taskId,
        uint32 round,
        uint16 fragment,
        bool momentum,
        ITrainingRegistryRounds.RoundRoots calldata roots,
        WeightsOpening calldata w
    ) external nonReentrant {
        Run storage run = _existing(taskId);
        uint32 chunkIndex = w.opening.chunkIndex;
        uint256 key = _weightsKey(fragment, momentum, chunkIndex);
        SlotChallenge storage sc = _slotChallenges[taskId][round][key];
        if (sc.challenger == address(0)) revert Registry__NoChallenge(taskId, round, fragment, address(0));
        if (block.timestamp > sc.deadline) revert Registry__ChallengeDeadline(sc.deadline);
        address payee = sc.challenger;
        if (round < _roundsFinalized(run) && _rootCommitments[taskId][round] == sc.commitment) {
            if (
                keccak256(
                        abi.encodePacked(roots.fragmentsRoot, roots.creditsRoot, roots.totalCredits, roots.bitmapsHash)
                    ) != sc.commitment
            ) revert ITrainingRegistryRounds.Registry__WrongRoots(round);
            _requireWeightsChunk(run, _rounds[taskId][round], roots.fragmentsRoot, fragment, momentum, round, w);
            payee = msg.sender;
            _rounds[taskId][round].challengeStatus = RunRoot.STATUS_CHALLENGE_LOST; // the receipt shows it
            emit WeightsAnswered(taskId, round, fragment, momentum, chunkIndex, w.opening.chunk, msg.sender);
        } else {
            // its round was discarded (or discarded and committed again): void, bond back
            emit ITrainingRegistryRounds.SlotChallengeVoided(taskId, round, fragment, type(uint16).max);
        }
        _settleChallenge(taskId, round, key, payee);
    }

    /// @dev The weights answer `w` checks out against the round (EvidenceVerifier.weightsOpening):
    /// reverts Registry__BadLeaf, Registry__WrongModelHash, Registry__BadOpening.
    function _requireWeightsChunk(
        Run storage run,
        RoundRecord storage rec,
        bytes32 fragmentsRoot,
        uint16 fragment,
        bool momentum,
        uint32 round,
        WeightsOpening calldata w
    ) private view {
        uint8 failed = _evidence.weightsOpening(
            WeightsContext({
                fragmentsRoot: fragmentsRoot,
                fragmentCount: run.fragmentCount,
                fragment: fragment,
                n: run.fragmentSizes[fragment],
                momentum: momentum,
                round: round,
                transcriptHash: rec.transcriptHash,
                acceptedCount: rec.acceptedCount,
                roundDigest: rec.roundDigest
            }),
            w
        );
        if (failed == 1) revert ITrainingRegistryRounds.Registry__BadLeaf(fragment, type(uint16).max);
        if (failed == 2) revert Registry__WrongModelHash(round, fragment);
        if (failed == 3) revert Registry__BadOpening(w.opening.chunkIndex);
    }

    // ------------------------------------------------------------ cancelled runs

    /// @inheritdoc ITrainingRegistryEvidence
    function cancelTask(bytes32 taskId) external {
        Run storage run = _existing(taskId);
        _requireStatus(run, taskId, RunStatus.Enrolling);
        if (msg.sender != run.sponsor) {
            // anyone may end a run that missed its enrollment deadline short of quorum
            if (block.timestamp <= run.enrollmentDeadline) revert Registry__NotSponsor(taskId, msg.sender);
            if (run.enrolledCount >= run.quorum) revert Registry__RunCanTrain(taskId, run.enrolledCount, run.quorum);
        }
        run.status = RunStatus.Cancelled;
        // no syncer exists while Enrolling (elections need a Training run) and nobody has
        // credits before round 0: every stake is refunded whole, the whole pool goes back
        uint256 pool = run.poolLeft;
        run.distributedPool = pool;
        run.poolLeft = 0;
        _refundStakes(run, taskId);
        _withdrawable[run.sponsor] += pool;
        emit PayoutCredited(taskId, run.sponsor, pool, 0);
        emit TaskCancelled(taskId, pool, run.enrolledCount);
    }

    /// @inheritdoc ITrainingRegistryEvidence
    function cancelStalledRun(bytes32 taskId) external {
        Run storage run = _runIn(taskId, RunStatus.Training);
        address silent = run.syncer;
        uint64 replaceableAt = _replaceableAt(run, _syncerTimeout);
        if (block.timestamp <= replaceableAt) revert Registry__SyncerStillActive(taskId, silent, replaceableAt);
        address able = _ableCandidate(silent, run.syncerBond);
        if (able != address(0)) revert Registry__RunCanGoOn(taskId, able);
        RootRun storage rr = _rootRuns[taskId];
        uint16 pending = run.openChallenges + rr.openSlotChallenges;
        if (pending != 0) revert Registry__ChallengesPending(taskId, pending);
        uint32 c = run.currentRound; // rounds committed (and not rewound) so far
        if (c != 0) {
            uint64 until = _rounds[taskId][c - 1].finalizedAt + run.challengeSeconds;
            if (block.timestamp <= until) revert ITrainingRegistryRounds.Registry__ChallengeWindowOpen(taskId, until);
        }

        run.status = RunStatus.Cancelled;
        uint256 burnt = 0;
        if (silent != address(0)) {
            // the failure a replacement would punish: the bond is burned, not returned
            burnt = _forfeitBond(run, silent);
            _burn(taskId, silent, burnt);
            run.syncer = address(0);
        }
        run.electionBlock = 0;
        // nobody credited yet: nothing to claim, the pool goes back at once (as at the seal)
        uint256 pot = run.totalCredits == 0 ? 0 : _trainersPot(run, c);
        uint256 back = run.poolLeft - pot;
        _withdrawable[run.sponsor] += back;
        run.poolLeft = pot;
        emit StalledRunCancelled(taskId, c, pot, back, burnt);
        uint256 m = _refundStakes(run, taskId);
        run.distributedPool = pot;
        // claims against the last committed credits root, as after sealRootRun
        if (pot != 0) _openClaims(rr, taskId, m);
    }

    /// @dev The trainers' part of a stalled run's pool after `c` committed rounds of N, atto-units:
    /// their rate for c rounds, floor((rewardPool - N * feePerRound) * c / N). poolLeft =
    /// rewardPool - c * feePerRound >= it, so the sponsor's rest (>= rewardPool * (N - c) / N)
    /// cannot underflow.
    function _trainersPot(Run storage run, uint32 c) private view returns (uint256) {
        uint256 n = run.maxRounds;
        return ((run.rewardPool - n * _syncerFeePerRound(run)) * c) / n;
    }

    // ------------------------------------------------------------ permits

    /// @inheritdoc ITrainingRegistryPermit
    function postTaskWithPermit(TaskParams calldata p, uint256 deadline, uint8 v, bytes32 r, bytes32 s)
        external
        nonReentrant
    {
        _tryPermit(p.rewardPool, deadline, v, r, s);
        _postTask(p);
    }

    /// @inheritdoc ITrainingRegistryPermit
    function enrollTrainerWithPermit(
        bytes32 taskId,
        uint256 stake,
        string calldata did,
        uint256 deadline,
        uint8 v,
        bytes32 r,
        bytes32 s
    ) external nonReentrant {
        _tryPermit(stake, deadline, v, r, s);
        _enrollTrainer(taskId, stake, did);
    }

    /// @inheritdoc ITrainingRegistryEvidence
    function proveInvalid(
        bytes32 taskId,
        uint32 round,
        uint16 fragment,
        address trainer,
        uint8 reason,
        SignedPayload calldata s,
        ChunkOpening calldata o
    ) external nonReentrant {
        Run storage run = _openRunRound(taskId, round, fragment);
        Trainer storage t = _liveSubmission(taskId, round, fragment, trainer);
        _requireSigned(taskId, round, fragment, trainer, s);
        // a norm outlier is proven against the previous round's accepted sums (proveNormOutlier):
        // the median over this round's submissions would be the forcing sybils' to set (attack 6)
        _requireChunkDefect(run, fragment, reason, s, o);
        _reject(taskId, round, fragment, t.index);
        _slashWithBounty(run, taskId, trainer, round, fragment, SlashReason(reason), _committedProver(msg.sender));
    }

    /// @inheritdoc ITrainingRegistryEvidence
    function proveNormOutlier(
        bytes32 taskId,
        uint32 round,
        uint16 fragment,
        address trainer,
        SignedPayload calldata s,
        NormReference calldata ref
    ) external nonReentrant {
        Run storage run = _openRunRound(taskId, round, fragment);
        _rootOf(taskId);
        if (run.normScreenSq == 0) revert Registry__NoNormScreen(taskId);
        if (round == 0) revert Registry__NoNormReference(taskId, round, fragment);
        Trainer storage t = _liveSubmission(taskId, round, fragment, trainer);
        _requireSigned(taskId, round, fragment, trainer, s);
        _requireReference(run, taskId, round - 1, fragment, s.payloadSumsq, ref);
        _reject(taskId, round, fragment, t.index);
        _slashWithBounty(run, taskId, trainer, round, fragment, SlashReason.NormOutlier, _committedProver(msg.sender));
    }

    /// @dev `ref` is round `previous`'s accepted set of `fragment`, each entry signed by its
    /// trainer, and `target` an outlier against its median (EvidenceVerifier.normReference).
    function _requireReference(
        Run storage run,
        bytes32 taskId,
        uint32 previous,
        uint16 fragment,
        uint32 target,
        NormReference calldata ref
    ) private view {
        ITrainingRegistryRounds.RoundRoots calldata p = ref.previous;
        if (
            keccak256(abi.encodePacked(p.fragmentsRoot, p.creditsRoot, p.totalCredits, p.bitmapsHash))
                != _rootCommitments[taskId][previous]
        ) revert ITrainingRegistryRounds.Registry__WrongRoots(previous);
        uint16 enrolled = run.enrolledCount;
        (uint8 code, bytes32[] memory hashes) = _evidence.normReference(
            NormContext({
                taskId: taskId,
                previousRound: previous,
                fragmentsRoot: p.fragmentsRoot,
                fragment: fragment,
                fragmentCount: run.fragmentCount,
                slotWidth: RoundProofs.nextPow2(enrolled),
                target: target,
                screenSq: run.normScreenSq
            }),
            ref
        );
        if (code == 1) revert ITrainingRegistryRounds.Registry__BadLeaf(fragment, type(uint16).max);
        if (code == 2) revert Registry__IncompleteSubmissionSet(ref.entries.length, ref.leaf.acceptedCount);
        if (code == 3) revert Registry__NoNormReference(taskId, previous + 1, fragment);
        if (code == 4) revert Registry__NotProven(uint8(SlashReason.NormOutlier));
        address[] storage list = _trainerList[taskId];
        for (uint256 i = 0; i < hashes.length; ++i) {
            uint16 index = ref.entries[i].trainerIndex;
            // no signature recovers to address(0): an index past the enrolled trainers fails
            _requireSignedBy(hashes[i], ref.entries[i].signature, index < enrolled ? list[index] : address(0));
        }
    }

    /// @inheritdoc ITrainingRegistryEvidence
    function challengeAvailability(
        bytes32 taskId,
        uint32 round,
        uint16 fragment,
        address trainer,
        SignedPayload calldata s,
        uint32 chunkIndex
    ) external nonReentrant {
        Run storage run = _openRunRound(taskId, round, fragment);
        // none opens later than one window after the later of the round's deadline and the
        // syncer's election: the last is settled one window after that, so a chain of challenges
        // cannot hold the commit back longer (PROTOCOL.md §4 "Bound of time"). A syncer elected
        // after the deadline gets a window of its own: else a forced payload withheld past the
        // round's window could be neither demanded nor left out by an honest successor
        uint64 lastOpen = run.syncerElectedAt;
        if (lastOpen < run.roundDeadline) lastOpen = run.roundDeadline;
        lastOpen += run.challengeSeconds;
        if (block.timestamp > lastOpen) revert Registry__DeadlinePassed(taskId, round, lastOpen);
        Trainer storage t = _liveSubmission(taskId, round, fragment, trainer);
        _requireSigned(taskId, round, fragment, trainer, s);
        uint256 m = (uint256(run.fragmentSizes[fragment]) + 15) / 16;
        // a chunk of the payload, or the whole of it (WHOLE_PAYLOAD: answered only with every chunk)
        if (chunkIndex >= m && chunkIndex != type(uint32).max) revert Registry__BadOpening(chunkIndex);
        AvailabilityChallenge storage c = _avail[taskId][round][_slotKey(t.index, fragment)];
        _countChallenge(taskId, (uint64(run.epoch) << 32) | round, fragment, trainer, t.index, chunkIndex);
        if (c.challenger != address(0)) {
            // a whole-payload challenge takes the place of a pending chunk challenge (its answer
            // holds that chunk too), whose bond goes back: no chunk challenge crowds it out
            if (chunkIndex != type(uint32).max) revert Registry__ChallengePending(taskId, round, fragment, trainer);
            _withdrawable[c.challenger] += c.bond;
            _closeChallenge(run, taskId, round, fragment, t.index);
        }
        uint256 bond = _challengeBond(run);
        uint64 deadline = uint64(block.timestamp) + run.challengeSeconds;
        c.challenger = msg.sender;
        c.deadline = deadline;
        c.chunkIndex = chunkIndex;
        c.payloadSumsq = s.payloadSumsq;
        c.payloadRoot = s.payloadRoot;
        c.bond = bond;
        run.challengesUntil = deadline; // deadlines only grow: now + a constant
        run.openChallenges += 1;
        _bondsHeld += bond;
        emit AvailabilityChallenged(taskId, trainer, round, fragment, msg.sender, chunkIndex, deadline, bond);
        _pullExact(msg.sender, bond);
    }

    /// @inheritdoc ITrainingRegistryEvidence
    function answerAvailability(bytes32 taskId, uint32 round, uint16 fragment, address trainer, ChunkOpening calldata o)
        external
    {
        Run storage run = _existing(taskId);
        (AvailabilityChallenge storage c, Trainer storage t) = _pendingChallenge(taskId, round, fragment, trainer);
        if (block.timestamp > c.deadline) revert Registry__ChallengeDeadline(c.deadline);
        if (
            o.chunkIndex != c.chunkIndex
                || !_evidence.opens(c.payloadRoot, c.payloadSumsq, run.fragmentSizes[fragment], o)
        ) revert Registry__BadOpening(o.chunkIndex);
        uint256 bond = c.bond;
        _closeChallenge(run, taskId, round, fragment, t.index);
        _withdrawable[trainer] += bond;
        emit AvailabilityAnswered(taskId, trainer, round, fragment, o.chunk);
    }

    /// @inheritdoc ITrainingRegistryEvidence
    function expireAvailability(bytes32 taskId, uint32 round, uint16 fragment, address trainer) external {
        Run storage run = _existing(taskId);
        (AvailabilityChallenge storage c, Trainer storage t) = _pendingChallenge(taskId, round, fragment, trainer);
        if (block.timestamp <= c.deadline) revert Registry__ChallengeDeadline(c.deadline);
        address challenger = c.challenger;
        uint256 bond = c.bond;
        _closeChallenge(run, taskId, round, fragment, t.index);
        uint256 states = _subsOf(taskId, round, run.epoch)[t.index];
        if ((states >> (2 * uint256(fragment))) & 3 == ST_SUBMITTED) _reject(taskId, round, fragment, t.index);
        _withdrawable[challenger] += bond;
        _slashWithBounty(run, taskId, trainer, round, fragment, SlashReason.Unavailable, challenger);
    }

    /// @inheritdoc ITrainingRegistryEvidence
    function challengeBond(bytes32 taskId) external view returns (uint256) {
        return _challengeBond(_existing(taskId));
    }

    /// @inheritdoc ITrainingRegistryEvidence
    function challengeBondsHeld() external view returns (uint256) {
        return _bondsHeld;
    }

    /// @inheritdoc ITrainingRegistryEvidence
    function availabilityChallenge(bytes32 taskId, uint32 round, uint16 fragment, address trainer)
        external
        view
        returns (AvailabilityChallenge memory)
    {
        Trainer storage t = _trainers[taskId][trainer];
        if (!t.enrolled) revert Registry__NotEnrolled(taskId, trainer);
        return _avail[taskId][round][_slotKey(t.index, fragment)];
    }

    /// @dev A candidate other than `exclude` that an election could draw for a run with `bond`
    /// (stake >= minSyncerStake, unlocked stake >= bond; anyone staked by now counts), or
    /// address(0) when none. At most MAX_SYNCER_CANDIDATES reads.
    function _ableCandidate(address exclude, uint256 bond) private view returns (address) {
        address[] storage list = _syncerList;
        uint256 n = list.length;
        for (uint256 i = 0; i < n; ++i) {
            address a = list[i];
            SyncerEntry storage e = _syncers[a];
            uint256 stake = e.stake;
            if (a != exclude && e.weight != 0 && stake >= _minSyncerStake && stake - e.locked >= bond) return a;
        }
        return address(0);
    }

    /// @dev Applies the caller's permit for `amount` atto-units to this registry, if it still
    /// can; then requires the caller's allowance to cover `amount`. The permit goes first, before
    /// the run's checks: it only sets an allowance that the pull at the end spends whole (a revert
    /// below undoes it). A failing permit is ignored on purpose: anyone can copy it from the
    /// mempool and send it first, which must not block the call (the allowance then covers it).
    function _tryPermit(uint256 amount, uint256 deadline, uint8 v, bytes32 r, bytes32 s) private {
        try IERC20Permit(address(_token)).permit(msg.sender, address(this), amount, deadline, v, r, s) {} catch {}
        uint256 allowed = _token.allowance(msg.sender, address(this));
        if (allowed < amount) revert Registry__AllowanceTooLow(msg.sender, allowed, amount);
    }

    /// @dev Reverts Registry__NotSignedBy unless `s` is `trainer`'s signature over this
    /// (round, fragment) with the open round's base weights root.
    function _requireSigned(bytes32 taskId, uint32 round, uint16 fragment, address trainer, SignedPayload calldata s)
        internal
        view
    {
        _requireSignedBy(_structHash(taskId, round, fragment, _runs[taskId].weightsRoot, s), s.signature, trainer);
    }

    /// @dev The Training run of `taskId` when `round` is its open round and `fragment` < F.
    function _openRunRound(bytes32 taskId, uint32 round, uint16 fragment) internal view returns (Run storage run) {
        run = _runIn(taskId, RunStatus.Training);
        if (round != run.currentRound) revert Registry__WrongRound(taskId, round, run.currentRound);
        if (fragment >= run.fragmentCount) revert Registry__BadFragment(fragment, run.fragmentCount);
    }

    /// @dev The enrolled trainer whose (round, fragment) submission is live (submitted, not
    /// rejected or accepted); reverts Registry__NotEnrolled / Registry__NoSuchSubmission.
    function _liveSubmission(bytes32 taskId, uint32 round, uint16 fragment, address trainer)
        internal
        view
        returns (Trainer storage t)
    {
        t = _trainers[taskId][trainer];
        if (!t.enrolled) revert Registry__NotEnrolled(taskId, trainer);
        if ((_subsOf(taskId, round, _runs[taskId].epoch)[t.index] >> (2 * uint256(fragment))) & 3 != ST_SUBMITTED) {
            revert Registry__NoSuchSubmission(taskId, round, fragment, trainer);
        }
    }

    /// @dev Marks a live submission rejected (01 -> 10).
    function _reject(bytes32 taskId, uint32 round, uint16 fragment, uint256 index) internal {
        // forge-lint: disable-next-line(incorrect-shift) -- a 2-bit mask shifted to the fragment's position, as intended
        _subsOf(taskId, round, _runs[taskId].epoch)[index] ^= (3 << (2 * uint256(fragment)));
    }

    /// @dev Reverts unless the opened chunk of the signed commitment shows the defect `reason`
    /// claims: NonFinite (a NaN or infinity below n) or Malformed (bad padding).
    function _requireChunkDefect(
        Run storage run,
        uint16 fragment,
        uint8 reason,
        SignedPayload calldata s,
        ChunkOpening calldata o
    ) internal view {
        uint8 wanted;
        if (reason == uint8(SlashReason.NonFinite)) wanted = _evidence.NON_FINITE();
        else if (reason == uint8(SlashReason.Malformed)) wanted = _evidence.BAD_PADDING();
        else revert Registry__UnknownReason(reason);
        uint8 defect = _evidence.chunkDefect(s.payloadRoot, s.payloadSumsq, run.fragmentSizes[fragment], o);
        if (defect == 255) revert Registry__BadOpening(o.chunkIndex);
        if (defect != wanted) revert Registry__NotProven(reason);
    }

    /// @dev Slashes INVALID_SLASH_BPS of the trainer's remaining stake: BOUNTY_BPS of it to
    /// `prover` (withdrawable), the rest burned (all of it when `prover` is address(0)).
    function _slashWithBounty(
        Run storage run,
        bytes32 taskId,
        address trainer,
        uint32 round,
        uint16 fragment,
        SlashReason reason,
        address prover
    ) internal {
        uint256 amount = _slashStake(run, taskId, trainer, round, fragment, reason);
        uint256 bounty = prover == address(0) ? 0 : (amount * BOUNTY_BPS) / BPS;
        _withdrawable[prover] += bounty;
        _burn(taskId, trainer, amount - bounty);
        emit InvalidProven(taskId, trainer, round, fragment, reason, prover, amount, bounty);
    }

    /// @dev Takes INVALID_SLASH_BPS of the trainer's remaining stake off its record and the run's
    /// stakes held (TrainerSlashed) and returns it, atto-units: the caller pays it out or burns it.
    function _slashStake(
        Run storage run,
        bytes32 taskId,
        address trainer,
        uint32 round,
        uint16 fragment,
        SlashReason reason
    ) private returns (uint256 amount) {
        Trainer storage t = _trainers[taskId][trainer];
        uint256 remaining = uint256(t.stake) - t.slashed;
        amount = (remaining * INVALID_SLASH_BPS) / BPS;
        // forge-lint: disable-next-line(unsafe-typecast) -- amount <= remaining <= stake < 2**128
        t.slashed += uint128(amount);
        run.stakeHeld -= amount;
        emit TrainerSlashed(taskId, trainer, reason, round, fragment, amount, remaining - amount);
    }

    /// @dev Counts one more availability challenge against the submission of trainer `index` on
    /// `fragment` in the round opening `opening` (epoch << 32 | round); reverts
    /// Registry__ChallengeLimit once MAX_AVAILABILITY_CHALLENGES chunk challenges, or one
    /// whole-payload challenge (chunk 2^32 - 1, counted apart in bit 7), were opened against it.
    function _countChallenge(
        bytes32 taskId,
        uint64 opening,
        uint16 fragment,
        address trainer,
        uint256 index,
        uint32 chunkIndex
    ) internal {
        bool whole = chunkIndex == type(uint32).max;
        uint256 slot = _slotKey(index, fragment);
        uint8 count = _availCounts[taskId][opening][slot];
        if (whole ? count >= WHOLE_CHALLENGED : count & 0x7F >= MAX_AVAILABILITY_CHALLENGES) {
            // forge-lint: disable-next-line(unsafe-typecast) -- the low 32 bits of the opening are the round
            uint32 round = uint32(opening);
            revert Registry__ChallengeLimit(taskId, round, fragment, trainer, whole ? 1 : MAX_AVAILABILITY_CHALLENGES);
        }
        // chunk count < MAX_AVAILABILITY_CHALLENGES in bits 0..6, bit 7 once whole: no overflow
        _availCounts[taskId][opening][slot] = whole ? count | WHOLE_CHALLENGED : count + 1;
    }

    /// @dev The pending challenge on (round, fragment, trainer) and the trainer; reverts Registry__NoChallenge.
    function _pendingChallenge(bytes32 taskId, uint32 round, uint16 fragment, address trainer)
        internal
        view
        returns (AvailabilityChallenge storage c, Trainer storage t)
    {
        t = _trainers[taskId][trainer];
        c = _avail[taskId][round][_slotKey(t.index, fragment)];
        if (!t.enrolled || c.challenger == address(0)) revert Registry__NoChallenge(taskId, round, fragment, trainer);
    }

    /// @dev Deletes a pending challenge and its accounting.
    function _closeChallenge(Run storage run, bytes32 taskId, uint32 round, uint16 fragment, uint256 index) internal {
        AvailabilityChallenge storage c = _avail[taskId][round][_slotKey(index, fragment)];
        _bondsHeld -= c.bond;
        run.openChallenges -= 1;
        delete _avail[taskId][round][_slotKey(index, fragment)];
    }
}
