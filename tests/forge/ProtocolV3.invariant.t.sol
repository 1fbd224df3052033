// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {ITrainingRegistryTypes} from "../../contracts/interfaces/ITrainingRegistryTypes.sol";
import {ITrainingRegistryRounds} from "../../contracts/interfaces/ITrainingRegistryRounds.sol";
import {ITrainingRegistryFull} from "../../contracts/interfaces/ITrainingRegistryFull.sol";
import {ITrainingRegistryEvidence} from "../../contracts/interfaces/ITrainingRegistryEvidence.sol";
import {TestBase} from "./lib/Cheats.sol";
import {RegistryBase} from "./RegistryBase.sol";
import {TrainingRegistry} from "../../contracts/TrainingRegistry.sol";
import {deployRegistry} from "./lib/DeployRegistry.sol";
import {MockERC20} from "../../contracts/mocks/MockERC20.sol";
import {CreditsTree} from "./lib/CreditsTree.sol";
import {RoundProofs} from "../../contracts/lib/RoundProofs.sol";
import {RunRoot} from "../../contracts/lib/RunRoot.sol";
import {ChunkMerkle} from "../../contracts/lib/ChunkMerkle.sol";
import {Referee} from "../../contracts/lib/Referee.sol";

/// @notice Adversarial handler of issue #23's invariant campaign on the ROOT FLOW
/// (contracts/PROTOCOL.md §4-§6). Every party may act at any time: sponsors post and cancel,
/// trainers enroll, deliver off-chain, force submissions (published or withheld), answer or not;
/// a sybil watcher challenges availability (chunk or whole payload), slots and weights chunks,
/// proves aggregates (true or equivocated evidence), omissions and norm outliers; attacker syncers
/// commit honestly, with wrong weights, an unopenable fragments root, an omitted forced
/// submission or another model in the receipt, and answer or go silent; anyone elects, replaces,
/// cancels a stalled run, seals, claims, sweeps, withdraws, and time moves.
///
/// Two parties are honest and react after every step (`_reflex`): the HONEST syncer commits only
/// the correct round (PROTOCOL.md §1 arithmetic through the referee), demands the whole of any
/// forced payload it cannot fetch, expires lapsed challenges and answers every slot and weights
/// challenge of its own rounds; trainer 0 is an honest trainer: it delivers its payload, answers
/// every availability challenge of its forced submissions and proves any omission of them.
///
/// Shape: M = 4 trainers (K = 2), F = 1 fragment of n = 64 values (4 chunks; only coordinates 0,
/// 16, 32, 48 are ever non-zero, so a vector is its 4 values `v[k]` at coordinate 16 k, and every
/// other coordinate stays +0 under the outer step), R = 2 rounds, grace 30 s, challenge 20 s,
/// syncer timeout 60 s, bond 50, fee 10 % (25 a round), pool 1,000.
contract ProtocolV3Handler is TestBase {
    uint256 internal constant M = 4;
    uint256 internal constant N = 64;
    uint32 internal constant ROUNDS = 3;
    uint256 internal constant MIN_STAKE = 10e18;
    uint256 internal constant MIN_SYNCER_STAKE = 100e18;
    uint32 internal constant TIMEOUT = 60;
    uint32 internal constant GRACE = 30;
    uint32 internal constant CH = 20;
    uint32 internal constant ENROLL = 300;
    uint256 internal constant BOND = 50e18;
    uint256 internal constant POOL = 1_000e18;
    uint32 internal constant WHOLE = type(uint32).max;
    uint32 internal constant LR = 0x3F333333; // 0.7
    uint32 internal constant MU = 0x3F666666; // 0.9
    /// @dev An attacker's own challenges of one submission: at most this many, so that the syncer
    /// always keeps one of MAX_AVAILABILITY_CHALLENGES (3) for the whole payload. Raising it to 3
    /// reached test_challengeLimitDoesNotLockOutTheWholePayloadChallenge (before its fix).
    uint8 internal constant ATTACKER_CHALLENGES = 3;

    MockERC20 public token;
    ITrainingRegistryFull public reg;
    ITrainingRegistryFull public rf;
    ITrainingRegistryEvidence public ev;

    address public constant HONEST = address(0x5c);
    address public constant ATT1 = address(0xA1);
    address public constant ATT2 = address(0xA2);
    address public constant SPONSOR = address(0x5905);
    address public constant WATCH = address(0x3a7c); // the sybils' watcher
    address public constant ANYONE = address(0xA11);
    uint256[] internal keys;
    address[] public trainers;
    bytes32[] public tasks;
    /// @dev Switch for the norm-outlier action (on by default).
    bool public normProofsOn;

    // ------------------------------------------------------------ ghost books

    struct Sub {
        bool exists; // available to syncers: delivered off-chain, or forced and revealed
        bool committed; // a forced commitment sent, not revealed yet
        bool publish; // a forced payload its trainer makes fetchable by all
        bool forced;
        uint8 published; // bitmask of the chunks public (or held by every syncer); 0xF = whole
        uint8 attackerChallenges;
        uint32[4] vals;
        bytes32 base;
        ITrainingRegistryTypes.SignedPayload sp;
    }

    struct RoundRec {
        address committer;
        uint8 lie; // 0 correct, 1 wrong weights, 2 unopenable root, 3 omitted forced, 4 other model
        uint256 opening;
        uint64 committedAt;
        uint32[4] w;
        uint32[4] m;
        uint256[] bitmaps;
        uint256[] credits; // cumulative after the round
        RoundProofs.FragmentLeaf leaf;
        bytes32 fragHash;
        ITrainingRegistryRounds.RoundRoots roots;
        bool honestForced; // trainer 0 had a live forced submission in this opening at the commit
    }

    struct Pending {
        bytes32 id;
        uint32 round;
        uint8 kind; // 1 slot, 2 weights
        uint16 index; // slot: trainer index
        bool momentum;
        uint32 chunk;
        uint256 opening; // the round's opening when challenged
        uint64 deadline;
    }

    mapping(bytes32 id => uint256) public opening; // increments on every new opening of a round
    mapping(bytes32 id => mapping(uint256 opening => mapping(uint256 i => Sub))) internal _subs;
    mapping(bytes32 id => RoundRec[]) internal _recs;
    mapping(bytes32 id => uint64) public postedAt;
    Pending[] internal _pending;

    uint256 public deposited;
    uint256 public withdrawn;
    uint256 public honestSyncerWithdrawn;

    // reach counters (the campaign is not vacuous)
    uint256 public posts;
    uint256 public forcedReveals;
    uint256 public unrevealedSlashes;
    uint256 public honestCommits;
    uint256 public lyingCommits;
    uint256 public availChallenges;
    uint256 public wholeChallenges;
    uint256 public availAnswers;
    uint256 public availExpiries;
    uint256 public slotChallenges;
    uint256 public slotAnswers;
    uint256 public weightsChallenges;
    uint256 public weightsAnswers;
    uint256 public convictions; // rounds proven wrong (any kind)
    uint256 public aggregateProofs;
    uint256 public normProofs;
    uint256 public replacements;
    uint256 public stalledCancels;
    uint256 public seals;
    uint256 public claims;
    uint256 public lastSecondChallenges; // raised at the last second a window allows

    // invariant flags
    bool public honestConvicted; // a proof succeeded against a round the honest syncer committed
    bool public falseProofWon; // an equivocated (false) aggregate proof succeeded

    constructor() {
        token = new MockERC20();
        reg = deployRegistry(token, MIN_SYNCER_STAKE, TIMEOUT, 0);
        rf = ITrainingRegistryFull(address(reg));
        ev = ITrainingRegistryEvidence(address(reg));
        for (uint256 i = 0; i < M; ++i) {
            keys.push(0xD00D + i);
            trainers.push(vm.addr(0xD00D + i));
            _approve(trainers[i]);
        }
        _approve(SPONSOR);
        _approve(WATCH);
        _approve(ANYONE);
        _register(HONEST);
        _register(ATT1);
        _register(ATT2);
        normProofsOn = true;
    }

    function setNormProofs(bool on) external {
        normProofsOn = on;
    }

    function _approve(address who) internal {
        vm.prank(who);
        token.approve(address(reg), type(uint256).max);
    }

    function _register(address who) internal {
        _approve(who);
        token.mint(who, MIN_SYNCER_STAKE);
        vm.prank(who);
        reg.registerSyncer(MIN_SYNCER_STAKE);
        deposited += MIN_SYNCER_STAKE;
        vm.roll(block.number + 1);
    }

    function tasksLength() external view returns (uint256) {
        return tasks.length;
    }

    function recsLength(bytes32 id) external view returns (uint256) {
        return _recs[id].length;
    }

    function rec(bytes32 id, uint256 r) external view returns (RoundRec memory) {
        return _recs[id][r];
    }

    function pendingLength() external view returns (uint256) {
        return _pending.length;
    }

    /// @dev Every action: sync the ghost books with rewinds, then the honest parties react.
    modifier step() {
        _;
        _syncAll();
        _reflex();
    }

    // ------------------------------------------------------------ vectors (§2, n = 64)

    function _chunk(uint32 v) internal pure returns (bytes memory c) {
        c = new bytes(64);
        c[0] = bytes1(uint8(v >> 24));
        c[1] = bytes1(uint8(v >> 16));
        c[2] = bytes1(uint8(v >> 8));
        c[3] = bytes1(uint8(v));
    }

    /// @dev The §2 tree of a 4-chunk vector whose chunk k holds v[k] at its first value.
    function _tree(uint32[4] memory v)
        internal
        pure
        returns (bytes32 root, uint32 sumsq, bytes32[4] memory h, uint32[4] memory s, bytes32[2] memory nh, uint32[2] memory ns)
    {
        for (uint256 k = 0; k < 4; ++k) {
            (h[k], s[k]) = ChunkMerkle.leaf(_chunk(v[k]));
        }
        (nh[0], ns[0]) = ChunkMerkle.node(h[0], s[0], h[1], s[1]);
        (nh[1], ns[1]) = ChunkMerkle.node(h[2], s[2], h[3], s[3]);
        (root, sumsq) = ChunkMerkle.node(nh[0], ns[0], nh[1], ns[1]);
    }

    function _root(uint32[4] memory v) internal pure returns (bytes32 root, uint32 sumsq) {
        (root, sumsq,,,,) = _tree(v);
    }

    function _open(uint32[4] memory v, uint256 k) internal pure returns (ITrainingRegistryTypes.ChunkOpening memory o) {
        (,, bytes32[4] memory h, uint32[4] memory s, bytes32[2] memory nh, uint32[2] memory ns) = _tree(v);
        // forge-lint: disable-next-line(unsafe-typecast) -- k < 4
        o.chunkIndex = uint32(k);
        o.chunk = _chunk(v[k]);
        o.siblingH = new bytes32[](2);
        o.siblingS = new uint32[](2);
        o.siblingH[0] = h[k ^ 1];
        o.siblingS[0] = s[k ^ 1];
        o.siblingH[1] = nh[1 - k / 2];
        o.siblingS[1] = ns[1 - k / 2];
    }

    function _coord(uint32[4] memory v, uint256 k) internal pure returns (RoundProofs.CoordinateOpening memory c) {
        ITrainingRegistryTypes.ChunkOpening memory o = _open(v, k);
        c.chunkIndex = k;
        c.chunk = o.chunk;
        c.siblingH = o.siblingH;
        c.siblingS = o.siblingS;
    }

    function _whole(uint32[4] memory v, uint256 chunks) internal pure returns (ITrainingRegistryTypes.ChunkOpening memory o) {
        (,,, uint32[4] memory s,,) = _tree(v);
        o.chunkIndex = WHOLE;
        o.siblingH = new bytes32[](0);
        o.siblingS = new uint32[](chunks);
        for (uint256 k = 0; k < chunks; ++k) {
            o.chunk = bytes.concat(o.chunk, _chunk(v[k]));
            o.siblingS[k] = s[k];
        }
    }

    function initialLeaf() public pure returns (RoundProofs.FragmentLeaf memory l) {
        uint32[4] memory zero;
        (l.weightsRoot, l.weightsSumsq) = _root(zero);
    }

    /// @dev Attackers' values: 0, 1.0, 2.0, -1.0, 1000.0, 2^-100 (a "tiny" payload).
    function _val(uint256 seed) internal pure returns (uint32) {
        uint32[6] memory vals = [uint32(0), 0x3F800000, 0x40000000, 0xBF800000, 0x447A0000, 0x0D800000];
        return vals[seed % 6];
    }

    function honestVals() public pure returns (uint32[4] memory v) {
        v = [uint32(0x3F800000), 0x3F000000, 0x3E800000, 0x3E000000]; // 1, 0.5, 0.25, 0.125
    }

    // ------------------------------------------------------------ lookups

    /// @dev The run `seed` names if it is live, else the next live one (cyclically), else it.
    function _task(uint256 seed) internal view returns (bytes32) {
        uint256 n = tasks.length;
        for (uint256 j = 0; j < n; ++j) {
            bytes32 id = tasks[(seed + j) % n];
            uint8 st = uint8(_status(id));
            if (st >= 1 && st <= 3) return id;
        }
        return tasks[seed % n];
    }

    function _status(bytes32 id) internal view returns (ITrainingRegistryTypes.RunStatus) {
        return reg.getRun(id).status;
    }

    function _training(bytes32 id) internal view returns (bool) {
        return _status(id) == ITrainingRegistryTypes.RunStatus.Training;
    }

    function _index(bytes32 id, address t) internal view returns (bool found, uint256 idx) {
        address[] memory list = reg.trainersOf(id);
        for (uint256 i = 0; i < list.length; ++i) {
            if (list[i] == t) return (true, i);
        }
    }

    function _live(bytes32 id, uint32 round, address t) internal view returns (bool) {
        (uint256 sub, uint256 rej) = reg.submissionsOf(id, round, t);
        return (sub & ~rej) & 1 == 1;
    }

    function _claimOf(bytes32 id, uint32 r) internal view returns (ITrainingRegistryRounds.RoundClaim memory a) {
        a.taskId = id;
        a.round = r;
        a.current = _recs[id][r].roots;
        if (r > 0) {
            a.previous = _recs[id][r - 1].roots;
            bytes32[] memory fh = new bytes32[](1);
            fh[0] = _recs[id][r - 1].fragHash;
            a.previousWeightsRoot = RunRoot.weightsRoot(fh);
        }
    }

    // ------------------------------------------------------------ ghost sync

    /// @dev Rewinds: the registry's committed count fell below the ghost's; drop the discarded
    /// rounds and start a new opening.
    function _syncAll() internal {
        for (uint256 t = 0; t < tasks.length; ++t) {
            bytes32 id = tasks[t];
            ITrainingRegistryTypes.RunView memory v = reg.getRun(id);
            if (
                v.status != ITrainingRegistryTypes.RunStatus.Training
                    && v.status != ITrainingRegistryTypes.RunStatus.Completed
            ) continue;
            uint256 committed = v.currentRound;
            if (committed < _recs[id].length) {
                for (uint256 r = committed; r < _recs[id].length; ++r) {
                    if (_recs[id][r].committer == HONEST) honestConvicted = honestConvicted || r == committed;
                }
                ++convictions;
                while (_recs[id].length > committed) {
                    _recs[id].pop();
                }
                ++opening[id];
            }
        }
    }

    // ------------------------------------------------------------ actions: set-up

    /// @dev A sponsor posts a run (at most 2 live, 6 in all); most of the time its 4 trainers
    /// enroll at once and anyone requests the election.
    function post(uint16 feeSeed) external step {
        if (tasks.length >= 6 || _liveRuns() >= 3) return;
        bytes32 id = keccak256(abi.encode("v3-inv", tasks.length));
        ITrainingRegistryTypes.TaskParams memory p;
        p.taskId = id;
        p.specHash = id;
        p.specCid = "cid";
        p.initialWeightsRoot = id;
        p.trainerCount = uint16(M);
        p.quorum = 2;
        p.fragmentCount = 1;
        p.innerSteps = 1;
        p.maxRounds = ROUNDS;
        p.graceWindowMs = uint64(GRACE) * 1000;
        p.aggregation = 0; // Mean
        p.minStake = MIN_STAKE;
        p.rewardPool = POOL;
        p.fragmentSizes = new uint64[](1);
        p.fragmentSizes[0] = uint64(N);
        p.enrollmentSeconds = ENROLL;
        p.syncerFeeBps = feeSeed % 2 == 0 ? 1000 : 0;
        p.syncerBond = BOND;
        p.normScreenSq = 0x42C80000; // 100.0
        p.challengeSeconds = CH;
        token.mint(SPONSOR, POOL);
        vm.prank(SPONSOR);
        reg.postTask(p);
        deposited += POOL;
        vm.prank(SPONSOR);
        rf.useRootFlow(
            id,
            RoundProofs.fragmentLeaf(initialLeaf()),
            ITrainingRegistryRounds.OuterRule({lr: LR, mu: MU, nesterov: true, alphaBps: 0})
        );
        tasks.push(id);
        postedAt[id] = uint64(block.timestamp);
        ++posts;
        if (feeSeed % 8 == 0) return;
        for (uint256 i = 0; i < M; ++i) {
            token.mint(trainers[i], MIN_STAKE);
            vm.prank(trainers[i]);
            reg.enrollTrainer(id, MIN_STAKE, "did:v3");
            deposited += MIN_STAKE;
        }
        _elect(id, 1);
    }

    function _liveRuns() internal view returns (uint256 n) {
        for (uint256 t = 0; t < tasks.length; ++t) {
            uint8 st = uint8(_status(tasks[t]));
            if (st >= 1 && st <= 3) ++n;
        }
    }

    function enroll(uint256 seed, uint256 who) external step {
        if (tasks.length == 0) return;
        address t = trainers[who % M];
        token.mint(t, MIN_STAKE);
        bytes32 id = _task(seed);
        vm.prank(t);
        try reg.enrollTrainer(id, MIN_STAKE, "did:v3") {
            deposited += MIN_STAKE;
        } catch {}
    }

    function closeEnrollment(uint256 seed) external step {
        if (tasks.length == 0) return;
        try reg.closeEnrollment(_task(seed)) {} catch {}
    }

    function cancel(uint256 seed, bool asSponsor) external step {
        if (tasks.length == 0) return;
        bytes32 id = _task(seed);
        vm.prank(asSponsor ? SPONSOR : ANYONE);
        try ev.cancelTask(id) {} catch {}
    }

    function elect(uint256 seed, uint8 blocks) external step {
        if (tasks.length == 0) return;
        _elect(_task(seed), 1 + blocks % 3);
    }

    function _elect(bytes32 id, uint256 blocks) internal returns (bool) {
        try reg.requestSyncerElection(id) {} catch {}
        vm.roll(block.number + blocks);
        address previous = reg.getRun(id).syncer;
        try reg.electSyncer(id) {
            if (previous != address(0)) ++replacements;
            return true;
        } catch {
            return false;
        }
    }

    function cancelStalled(uint256 seed) external step {
        if (tasks.length == 0) return;
        try ev.cancelStalledRun(_task(seed)) {
            ++stalledCancels;
        } catch {}
    }

    // ------------------------------------------------------------ actions: trainers

    function _sign(bytes32 id, uint256 i, uint32[4] memory vals)
        internal
        view
        returns (ITrainingRegistryTypes.SignedPayload memory sp, bytes32 base)
    {
        ITrainingRegistryTypes.RunView memory v = reg.getRun(id);
        base = v.weightsRoot;
        (sp.payloadRoot, sp.payloadSumsq) = _root(vals);
        sp.cid = "bafkreipayload";
        sp.payloadHash = keccak256(abi.encode(id, i, v.currentRound, vals));
        (uint8 sv, bytes32 r, bytes32 s_) = vm.sign(keys[i], reg.outerGradientDigest(id, v.currentRound, 0, base, sp));
        sp.signature = abi.encodePacked(r, s_, sv);
    }

    function _attackerVals(uint256 i, uint256 valSeed) internal pure returns (uint32[4] memory vals) {
        if (i == 0) return honestVals();
        for (uint256 k = 0; k < 4; ++k) {
            vals[k] = _val(valSeed >> (8 * k));
        }
    }

    /// @dev Trainer `who` hands a signed submission of the open round to the syncers off-chain
    /// (every syncer can fetch it); a forced submission of the same opening takes precedence.
    function deliver(uint256 seed, uint256 who, uint256 valSeed) external step {
        if (tasks.length == 0) return;
        bytes32 id = _task(seed);
        _deliver(id, who % M, _attackerVals(who % M, valSeed));
    }

    function _deliver(bytes32 id, uint256 i, uint32[4] memory vals) internal {
        if (!_training(id)) return;
        (bool found,) = _index(id, trainers[i]);
        if (!found) return;
        Sub storage s = _subs[id][opening[id]][i];
        if (s.forced || s.committed) return;
        (ITrainingRegistryTypes.SignedPayload memory sp, bytes32 base) = _sign(id, i, vals);
        s.exists = true;
        s.published = 0xF;
        s.vals = vals;
        s.base = base;
        s.sp = sp;
    }

    /// @dev Trainer `who` commits to a forced submission of the open round (commit phase only);
    /// `publish`: its payload will be fetchable by all (the honest trainer always publishes).
    function commitForced(uint256 seed, uint256 who, uint256 valSeed, bool publish, bool revealNow) external step {
        if (tasks.length == 0) return;
        bytes32 id = _task(seed);
        uint256 i = who % M;
        if (!_commitForced(id, i, _attackerVals(i, valSeed), publish || i == 0) || !revealNow) return;
        uint256 op = opening[id];
        (uint64 closes,) = rf.commitPhase(id);
        if (block.timestamp <= closes) _advanceTo(closes + 1);
        if (opening[id] == op && _training(id)) _reveal(id, i);
    }

    function _commitForced(bytes32 id, uint256 i, uint32[4] memory vals, bool publish) internal returns (bool) {
        if (!_training(id)) return false;
        ITrainingRegistryTypes.RunView memory v = reg.getRun(id);
        (ITrainingRegistryTypes.SignedPayload memory sp, bytes32 base) = _sign(id, i, vals);
        bytes32 sh = RoundProofs.structHash(
            id, v.currentRound, 0, base, sp.payloadRoot, sp.payloadSumsq, sp.cid, sp.payloadHash
        );
        vm.prank(trainers[i]);
        try ev.commitSubmission(id, v.currentRound, 0, keccak256(abi.encode(sh, trainers[i]))) {}
        catch {
            return false;
        }
        Sub storage s = _subs[id][opening[id]][i];
        s.exists = false; // the forced one replaces what it delivered off-chain
        s.committed = true;
        s.forced = false;
        s.publish = publish;
        s.vals = vals;
        s.base = base;
        s.sp = sp;
        return true;
    }

    /// @dev Trainer `who` reveals its forced commitment (the clock moves past the commit phase
    /// first, honest parties reacting on the way).
    function reveal(uint256 seed, uint256 who) external step {
        if (tasks.length == 0) return;
        bytes32 id = _task(seed);
        if (!_training(id)) return;
        uint256 op = opening[id];
        (uint64 closes,) = rf.commitPhase(id);
        if (block.timestamp <= closes) _advanceTo(closes + 1);
        if (opening[id] != op || !_training(id)) return; // the round moved on meanwhile
        _reveal(id, who % M);
    }

    function _reveal(bytes32 id, uint256 i) internal returns (bool) {
        Sub storage s = _subs[id][opening[id]][i];
        if (!s.committed) return false;
        try reg.submitOuterGradient(id, reg.getRun(id).currentRound, 0, s.sp) {
            s.committed = false;
            s.exists = true;
            s.forced = true;
            s.published = s.publish ? 0xF : 0;
            ++forcedReveals;
            return true;
        } catch {
            return false;
        }
    }

    /// @dev An attacker syncer leaves the pool (its stake becomes withdrawable), or (`back`)
    /// registers again with a fresh minimum stake (or tops up a stake its slashes cut).
    function unregister(bool second, bool back) external step {
        address a = second ? ATT2 : ATT1;
        if (back) {
            token.mint(a, MIN_SYNCER_STAKE);
            vm.prank(a);
            try reg.registerSyncer(MIN_SYNCER_STAKE) {
                deposited += MIN_SYNCER_STAKE;
            } catch {}
            return;
        }
        vm.prank(a);
        try reg.unregisterSyncer() {} catch {}
    }

    // ------------------------------------------------------------ actions: availability

    /// @dev The sybil watcher challenges trainer `who`'s forced submission (a chunk or, with
    /// `whole`, the whole payload), sometimes at the last second the window allows.
    function challengeAvail(uint256 seed, uint256 who, uint8 chunk, bool whole, bool lastSecond) external step {
        if (tasks.length == 0) return;
        bytes32 id = _task(seed);
        if (!_training(id)) return;
        (bool any, uint256 i) = _forcedFrom(id, who);
        if (!any || _subs[id][opening[id]][i].attackerChallenges >= ATTACKER_CHALLENGES) return;
        if (lastSecond) {
            uint256 op = opening[id];
            uint64 last = reg.getRun(id).roundDeadline + CH;
            if (block.timestamp < last) _advanceTo(last);
            if (!_training(id) || opening[id] != op) return;
        }
        _challengeAvail(id, i, whole ? WHOLE : chunk % 4, lastSecond);
    }

    function _challengeAvail(bytes32 id, uint256 i, uint32 chunk, bool lastSecond) internal {
        Sub storage s = _subs[id][opening[id]][i];
        uint256 bond = ev.challengeBond(id);
        token.mint(WATCH, bond);
        uint32 round = reg.getRun(id).currentRound;
        vm.prank(WATCH);
        try ev.challengeAvailability(id, round, 0, trainers[i], s.sp, chunk) {
            deposited += bond;
            ++s.attackerChallenges;
            ++availChallenges;
            if (lastSecond) ++lastSecondChallenges;
        } catch {}
    }

    /// @dev The first trainer from `who` on (cyclically) with a forced submission in the opening.
    function _forcedFrom(bytes32 id, uint256 who) internal view returns (bool any, uint256 i) {
        for (uint256 j = 0; j < M; ++j) {
            i = (who + j) % M;
            if (_subs[id][opening[id]][i].forced) return (true, i);
        }
    }

    /// @dev An attacker trainer answers its pending challenge: with the chunk, every chunk, or
    /// (`short_`) one chunk short of a whole-payload answer (no answer).
    function answerAvail(uint256 seed, uint256 who, bool short_) external step {
        if (tasks.length == 0) return;
        bytes32 id = _task(seed);
        if (!_training(id)) return;
        (bool any, uint256 i) = _forcedFrom(id, who);
        if (!any || i == 0) return; // the honest trainer answers in _reflex
        _answerAvail(id, i, short_);
    }

    function _answerAvail(bytes32 id, uint256 i, bool short_) internal {
        uint32 round = reg.getRun(id).currentRound;
        Sub storage s = _subs[id][opening[id]][i];
        if (!s.forced) return;
        ITrainingRegistryTypes.AvailabilityChallenge memory c = ev.availabilityChallenge(id, round, 0, trainers[i]);
        if (c.challenger == address(0)) return;
        ITrainingRegistryTypes.ChunkOpening memory o =
            c.chunkIndex == WHOLE ? _whole(s.vals, short_ ? 3 : 4) : _open(s.vals, c.chunkIndex);
        vm.prank(trainers[i]);
        try ev.answerAvailability(id, round, 0, trainers[i], o) {
            s.published |= c.chunkIndex == WHOLE ? 0xF : uint8(1 << c.chunkIndex);
            ++availAnswers;
        } catch {}
    }

    function expireAvail(uint256 seed, uint256 who) external step {
        if (tasks.length == 0) return;
        bytes32 id = _task(seed);
        if (!_training(id)) return;
        try ev.expireAvailability(id, reg.getRun(id).currentRound, 0, trainers[who % M]) {
            ++availExpiries;
        } catch {}
    }

    // ------------------------------------------------------------ round building

    /// @dev The round `lie` would commit now from what every syncer can fetch: each live forced
    /// submission (whole payload public) and each off-chain one, in trainer order.
    function _build(bytes32 id, uint8 lie, address who)
        internal
        view
        returns (RoundRec memory rr, ITrainingRegistryRounds.RootCommit memory c, bool complete)
    {
        uint32 r = reg.getRun(id).currentRound;
        rr.committer = who;
        rr.lie = lie;
        rr.opening = opening[id];
        (rr.bitmaps, complete, rr.honestForced) = _acceptedSet(id, r, rr.opening, lie);
        uint256 m = rr.bitmaps.length;
        uint256[] memory prevCredits = new uint256[](m);
        rr.credits = new uint256[](m);
        if (r > 0) {
            for (uint256 i = 0; i < m; ++i) {
                prevCredits[i] = _recs[id][r - 1].credits[i];
            }
        }
        uint256 total;
        // an attacker withholds its endorsement from some accepted submissions (PROTOCOL.md §5
        // "Endorsed credit": their credit goes to the high half of the credits word); the honest
        // syncer endorses every submission of this handler (none is a no-work payload)
        uint256[] memory unendorsed = new uint256[](m);
        uint256 pick = who == HONEST ? 0 : uint256(keccak256(abi.encode("unendorsed", id, r, rr.opening)));
        for (uint256 i = 0; i < m; ++i) {
            unendorsed[i] = rr.bitmaps[i] & (pick >> i);
            rr.credits[i] =
                prevCredits[i] + (rr.bitmaps[i] & ~unendorsed[i] & 1) * N + ((unendorsed[i] & 1) * N << 128);
            total += (rr.credits[i] & type(uint128).max) + (rr.credits[i] >> 128);
            rr.leaf.acceptedCount += uint16(rr.bitmaps[i] & 1);
        }
        (rr.w, rr.m) = _vectors(id, r, rr.opening, rr.bitmaps);
        if (lie == 1) rr.w[0] ^= 1; // one bit off at coordinate 0
        rr.leaf.acceptedRoot = _acceptedRoot(id, r, rr.opening, rr.bitmaps);
        (rr.leaf.weightsRoot, rr.leaf.weightsSumsq) = _root(rr.w);
        (rr.leaf.momentumRoot, rr.leaf.momentumSumsq) = _root(rr.m);
        rr.fragHash = lie == 4 ? keccak256(abi.encode("another model", id, r)) : rr.leaf.weightsRoot;
        rr.roots.fragmentsRoot =
            lie == 2 ? keccak256(abi.encode("unopenable", id, r, block.timestamp)) : RoundProofs.fragmentLeaf(rr.leaf);
        (rr.roots.creditsRoot,) = CreditsTree.rootAndPath(CreditsTree.leaves(rr.credits), 0);
        rr.roots.totalCredits = total;
        rr.roots.bitmapsHash = keccak256(abi.encodePacked(rr.bitmaps));
        c.taskId = id;
        c.round = r;
        c.fragmentsRoot = rr.roots.fragmentsRoot;
        c.acceptedBitmaps = rr.bitmaps;
        c.previousCredits = prevCredits;
        c.fragmentHashes = new bytes32[](1);
        c.fragmentHashes[0] = rr.fragHash;
        c.transcriptHash = keccak256(abi.encode("transcript", id, r, rr.opening));
        c.transcriptCid = "bafkreitranscript";
        c.unendorsedBitmaps = unendorsed;
    }

    /// @dev Who round r's commit accepts: every off-chain submission and every live forced one
    /// (lie 3: the first live forced one left out); `complete` is false when a forced payload
    /// accepted is not wholly public.
    function _acceptedSet(bytes32 id, uint32 r, uint256 op, uint8 lie)
        internal
        view
        returns (uint256[] memory bitmaps, bool complete, bool honestForced)
    {
        uint256 m = reg.trainersOf(id).length;
        bitmaps = new uint256[](m);
        complete = true;
        bool omitted;
        for (uint256 i = 0; i < m; ++i) {
            Sub storage s = _subs[id][op][i];
            if (!s.exists) continue;
            if (s.forced) {
                if (!_live(id, r, trainers[i])) continue;
                if (i == 0) honestForced = true;
                if (lie == 3 && !omitted) {
                    omitted = true;
                    continue;
                }
                if (s.published != 0xF) complete = false;
            }
            bitmaps[i] = 1;
        }
    }

    /// @dev The new weights and momentum (§1: Mean of the accepted values in trainer order, then
    /// Nesterov from the previous round's, +0 initially) at coordinates 0, 16, 32, 48.
    function _vectors(bytes32 id, uint32 r, uint256 op, uint256[] memory bitmaps)
        internal
        view
        returns (uint32[4] memory w, uint32[4] memory mo)
    {
        uint32[4] memory pw;
        uint32[4] memory pm;
        if (r > 0) {
            pw = _recs[id][r - 1].w;
            pm = _recs[id][r - 1].m;
        }
        uint256 count;
        for (uint256 i = 0; i < bitmaps.length; ++i) {
            count += bitmaps[i] & 1;
        }
        for (uint256 k = 0; k < 4; ++k) {
            uint32[] memory xs = new uint32[](count);
            uint256 j;
            for (uint256 i = 0; i < bitmaps.length; ++i) {
                if (bitmaps[i] & 1 == 1) xs[j++] = _subs[id][op][i].vals[k];
            }
            uint32 g = count == 0 ? 0 : Referee.aggregate(Referee.RULE_MEAN, xs, 0);
            (w[k], mo[k]) = Referee.nesterov(pw[k], pm[k], g, LR, MU, true);
        }
    }

    function _slotOf(bytes32 id, uint32 r, uint256 op, uint256 i) internal view returns (bytes32) {
        Sub storage s = _subs[id][op][i];
        return RoundProofs.slotLeaf(
            uint16(i),
            RoundProofs.structHash(id, r, 0, s.base, s.sp.payloadRoot, s.sp.payloadSumsq, s.sp.cid, s.sp.payloadHash)
        );
    }

    function _slots(bytes32 id, uint32 r, uint256 op, uint256[] memory bitmaps)
        internal
        view
        returns (bytes32[4] memory slots)
    {
        for (uint256 i = 0; i < bitmaps.length; ++i) {
            if (bitmaps[i] & 1 == 1) slots[i] = _slotOf(id, r, op, i);
        }
    }

    function _acceptedRoot(bytes32 id, uint32 r, uint256 op, uint256[] memory bitmaps) internal view returns (bytes32) {
        bytes32[4] memory sl = _slots(id, r, op, bitmaps);
        return keccak256(
            abi.encodePacked(keccak256(abi.encodePacked(sl[0], sl[1])), keccak256(abi.encodePacked(sl[2], sl[3])))
        );
    }

    function _commit(bytes32 id, address who, uint8 lie) internal returns (bool) {
        (RoundRec memory rr, ITrainingRegistryRounds.RootCommit memory c, bool complete) = _build(id, lie, who);
        if (who == HONEST && !complete) return false; // it cannot compute a payload it never saw
        rr.committedAt = uint64(block.timestamp);
        vm.prank(who);
        try rf.commitRound(c) {
            _recs[id].push(rr);
            ++opening[id];
            if (who == HONEST) ++honestCommits;
            else if (lie != 0) ++lyingCommits;
            return true;
        } catch {
            return false;
        }
    }

    /// @dev The run's syncer, if an attacker, commits the open round (lie kind `lie % 5`).
    function commitAttacker(uint256 seed, uint8 lie) external step {
        if (tasks.length == 0) return;
        bytes32 id = _task(seed);
        address s = reg.getRun(id).syncer;
        if (s != ATT1 && s != ATT2 || !_training(id)) return;
        (uint64 closes,) = rf.commitPhase(id);
        if (block.timestamp <= closes) _advanceTo(closes + 1);
        if (!_training(id) || reg.getRun(id).syncer != s) return;
        _commit(id, s, lie % 5);
    }

    // ------------------------------------------------------------ actions: round challenges

    /// @dev Anyone (attacker 1) slashes trainer `who`'s commitment of a committed round as never
    /// revealed: it must hold only for a commitment that was not revealed (never the honest
    /// trainer's, which reveals as soon as the commit phase is over).
    function slashUnrevealed(uint256 seed, uint256 back, uint256 who) external step {
        if (tasks.length == 0) return;
        bytes32 id = _task(seed);
        (bool ok, uint32 r) = _committedRound(id, back);
        if (!ok) return;
        vm.prank(ATT1);
        try ev.slashUnrevealed(id, r, 0, trainers[who % M]) {
            ++unrevealedSlashes;
        } catch {}
    }

    function _committedRound(bytes32 id, uint256 back) internal view returns (bool ok, uint32 r) {
        uint256 n = _recs[id].length;
        if (n == 0) return (false, 0);
        // forge-lint: disable-next-line(unsafe-typecast) -- n <= ROUNDS
        r = uint32(n - 1 - (back % 4 == 0 ? back / 4 % n : 0)); // mostly the latest
        ok = true;
    }

    function challengeSlot(uint256 seed, uint256 back, uint256 who, bool lastSecond) external step {
        if (tasks.length == 0) return;
        bytes32 id = _task(seed);
        (bool ok, uint32 r) = _committedRound(id, back);
        if (!ok) return;
        if (lastSecond) _toLastSecond(id, r);
        if (_recs[id].length <= r) return;
        uint16 i = uint16(who % M);
        uint256 bond = ev.challengeBond(id);
        token.mint(WATCH, bond);
        ITrainingRegistryRounds.RoundClaim memory a = _claimOf(id, r); // before the prank (a library call takes it)
        vm.prank(WATCH);
        try rf.challengeSlot(a, _recs[id][r].bitmaps, 0, i) {
            deposited += bond;
            ++slotChallenges;
            if (lastSecond) ++lastSecondChallenges;
            _pending.push(Pending(id, r, 1, i, false, 0, _recs[id][r].opening, uint64(block.timestamp) + CH));
        } catch {}
    }

    function challengeWeights(uint256 seed, uint256 back, bool momentum, uint8 chunk, bool lastSecond) external step {
        if (tasks.length == 0) return;
        bytes32 id = _task(seed);
        (bool ok, uint32 r) = _committedRound(id, back);
        if (!ok) return;
        if (lastSecond) _toLastSecond(id, r);
        if (_recs[id].length <= r) return;
        uint256 bond = ev.challengeBond(id);
        token.mint(WATCH, bond);
        vm.prank(WATCH);
        try rf.challengeWeights(id, r, 0, momentum, chunk % 4) {
            deposited += bond;
            ++weightsChallenges;
            if (lastSecond) ++lastSecondChallenges;
            _pending.push(
                Pending(id, r, 2, 0, momentum, chunk % 4, _recs[id][r].opening, uint64(block.timestamp) + CH)
            );
        } catch {}
    }

    /// @dev Moves to the last second of round r's challenge window (honest parties react on the way).
    function _toLastSecond(bytes32 id, uint32 r) internal {
        uint64 until = _recs[id][r].committedAt + CH;
        if (block.timestamp < until) _advanceTo(until);
    }

    /// @dev Answers pending challenge `p` as `who` from the ghost's data (reverts inside are caught).
    function _answer(uint256 p, address who) internal returns (bool) {
        Pending memory c = _pending[p];
        if (_recs[c.id].length <= c.round || _recs[c.id][c.round].opening != c.opening) return false;
        RoundRec storage rr = _recs[c.id][c.round];
        if (c.kind == 1) {
            Sub storage s = _subs[c.id][rr.opening][c.index];
            ITrainingRegistryRounds.SlotAnswer memory ans;
            ans.leaf = rr.leaf;
            ans.leafPath = new bytes32[](0);
            ans.baseRoot = s.base;
            ans.payloadRoot = s.sp.payloadRoot;
            ans.payloadSumsq = s.sp.payloadSumsq;
            ans.cidHash = keccak256(bytes(s.sp.cid));
            ans.payloadHash = s.sp.payloadHash;
            ans.signature = s.sp.signature;
            ans.slotPath = _slotPath(c.id, rr, c.index);
            vm.prank(who);
            try rf.answerSlot(c.id, c.round, 0, c.index, rr.roots, ans) {
                ++slotAnswers;
                return true;
            } catch {
                return false;
            }
        }
        ITrainingRegistryEvidence.WeightsOpening memory w;
        w.leaf = rr.leaf;
        w.leafPath = new bytes32[](0);
        w.fragmentHashes = new bytes32[](1);
        w.fragmentHashes[0] = rr.fragHash;
        w.opening = _open(c.momentum ? rr.m : rr.w, c.chunk);
        vm.prank(who);
        try ev.answerWeights(c.id, c.round, 0, c.momentum, rr.roots, w) {
            ++weightsAnswers;
            return true;
        } catch {
            return false;
        }
    }

    /// @dev Slot i's path in round r's accepted set (P = 4: its sibling, then the other pair).
    function _slotPath(bytes32 id, RoundRec storage rr, uint256 i) internal view returns (bytes32[] memory path) {
        bytes32[4] memory slots = _slots(id, _roundOf(id, rr), rr.opening, rr.bitmaps);
        path = new bytes32[](2);
        path[0] = slots[i ^ 1];
        path[1] = i < 2
            ? keccak256(abi.encodePacked(slots[2], slots[3]))
            : keccak256(abi.encodePacked(slots[0], slots[1]));
    }

    function _roundOf(bytes32 id, RoundRec storage rr) internal view returns (uint32) {
        RoundRec[] storage all = _recs[id];
        for (uint256 r = 0; r < all.length; ++r) {
            // forge-lint: disable-next-line(unsafe-typecast) -- r < ROUNDS
            if (all[r].opening == rr.opening) return uint32(r);
        }
        return 0;
    }

    /// @dev An attacker syncer answers a pending challenge of its own round (if it can open it).
    function answerAsAttacker(uint256 p) external step {
        if (_pending.length == 0) return;
        Pending memory c = _pending[p % _pending.length];
        if (_recs[c.id].length <= c.round) return;
        address committer = _recs[c.id][c.round].committer;
        if (committer == HONEST) return;
        _answer(p % _pending.length, committer);
    }

    /// @dev Anyone expires a pending slot or weights challenge (convicts its round if unanswered).
    function expireRound(uint256 p) external step {
        if (_pending.length == 0) return;
        _expire(p % _pending.length);
    }

    function _expire(uint256 p) internal returns (bool done) {
        Pending memory c = _pending[p];
        if (block.timestamp <= c.deadline) return false;
        ITrainingRegistryRounds.RoundClaim memory a;
        if (_recs[c.id].length > c.round && _recs[c.id][c.round].opening == c.opening) a = _claimOf(c.id, c.round);
        else a.taskId = c.id;
        a.round = c.round;
        vm.prank(WATCH);
        if (c.kind == 1) {
            try rf.expireSlot(a, 0, c.index) {
                done = true;
            } catch {}
        } else {
            try rf.expireWeights(a, 0, c.momentum, c.chunk) {
                done = true;
            } catch {}
        }
        if (done) _dropPending(p);
    }

    function _dropPending(uint256 p) internal {
        _pending[p] = _pending[_pending.length - 1];
        _pending.pop();
    }

    /// @dev The sybil watcher proves round `back`'s aggregate wrong at chunk `chunk`, with the true
    /// accepted payloads or (`equivocate`) with attacker trainer entries re-signed over other values.
    function proveAggregate(uint256 seed, uint256 back, uint8 chunk, bool equivocate) external step {
        if (tasks.length == 0) return;
        bytes32 id = _task(seed);
        (bool ok, uint32 r) = _committedRound(id, back);
        if (!ok) return;
        (RoundProofs.AggregateOpening memory o, bytes[] memory sigs, bool changed) = _aggregateOpening(id, r, chunk % 4, equivocate);
        if (equivocate && !changed) return;
        address committer = _recs[id][r].committer;
        ITrainingRegistryRounds.RoundClaim memory a = _claimOf(id, r); // before the prank (a library call takes it)
        vm.prank(WATCH);
        try rf.proveAggregate(a, o, sigs) {
            ++aggregateProofs;
            if (equivocate) falseProofWon = true;
            if (committer == HONEST) honestConvicted = true;
        } catch {}
    }

    function _aggregateOpening(bytes32 id, uint32 r, uint256 k, bool equivocate)
        internal
        returns (RoundProofs.AggregateOpening memory o, bytes[] memory sigs, bool changed)
    {
        RoundRec storage rr = _recs[id][r];
        o.fragment = 0;
        o.coordinate = 16 * k;
        o.current = rr.leaf;
        o.currentPath = new bytes32[](0);
        o.previousPath = new bytes32[](0);
        uint32[4] memory pw;
        uint32[4] memory pm;
        if (r == 0) {
            o.previous = initialLeaf();
        } else {
            o.previous = _recs[id][r - 1].leaf;
            pw = _recs[id][r - 1].w;
            pm = _recs[id][r - 1].m;
        }
        o.prevWeights = _coord(pw, k);
        o.prevMomentum = _coord(pm, k);
        o.newWeights = _coord(rr.w, k);
        o.newMomentum = _coord(rr.m, k);
        (o.entries, sigs, changed) = _entries(id, r, k, equivocate);
    }

    function _entries(bytes32 id, uint32 r, uint256 k, bool equivocate)
        internal
        view
        returns (RoundProofs.AcceptedEntry[] memory entries, bytes[] memory sigs, bool changed)
    {
        RoundRec storage rr = _recs[id][r];
        uint256 count = rr.leaf.acceptedCount;
        entries = new RoundProofs.AcceptedEntry[](count);
        sigs = new bytes[](count);
        uint256 e;
        for (uint256 i = 0; i < rr.bitmaps.length && e < count; ++i) {
            if (rr.bitmaps[i] & 1 == 0) continue;
            bool lie = equivocate && i != 0 && !changed;
            changed = changed || lie;
            (entries[e], sigs[e]) = _entry(id, r, rr, i, k, lie);
            ++e;
        }
    }

    /// @dev Accepted entry i of round r opened at chunk k; with `equivocate` the sybil signs a
    /// second payload for the same slot and opens that one.
    function _entry(bytes32 id, uint32 r, RoundRec storage rr, uint256 i, uint256 k, bool equivocate)
        internal
        view
        returns (RoundProofs.AcceptedEntry memory en, bytes memory sig)
    {
        Sub storage s = _subs[id][rr.opening][i];
        ITrainingRegistryTypes.SignedPayload memory sp = s.sp;
        uint32[4] memory vals = s.vals;
        if (equivocate) {
            vals[k] = vals[k] == 0x3F800000 ? 0x40000000 : 0x3F800000;
            (sp.payloadRoot, sp.payloadSumsq) = _root(vals);
            sp.signature = _sig(i, reg.outerGradientDigest(id, r, 0, s.base, sp));
        }
        en.trainerIndex = uint16(i);
        en.structHash = RoundProofs.structHash(id, r, 0, s.base, sp.payloadRoot, sp.payloadSumsq, sp.cid, sp.payloadHash);
        en.slotPath = _slotPath(id, rr, i);
        en.baseRoot = s.base;
        en.payloadRoot = sp.payloadRoot;
        en.payloadSumsq = sp.payloadSumsq;
        en.cidHash = keccak256(bytes(sp.cid));
        en.payloadHash = sp.payloadHash;
        en.payload = _coord(vals, k);
        sig = sp.signature;
    }

    function _sig(uint256 i, bytes32 digest) internal view returns (bytes memory) {
        (uint8 sv, bytes32 rs, bytes32 ss) = vm.sign(keys[i], digest);
        return abi.encodePacked(rs, ss, sv);
    }

    /// @dev Anyone proves that round `back` left out trainer `who`'s live forced submission.
    function proveOmission(uint256 seed, uint256 back, uint256 who) external step {
        if (tasks.length == 0) return;
        bytes32 id = _task(seed);
        (bool ok, uint32 r) = _committedRound(id, back);
        if (!ok) return;
        _proveOmission(id, r, uint16(who % M), WATCH);
    }

    function _proveOmission(bytes32 id, uint32 r, uint16 i, address who) internal returns (bool) {
        address committer = _recs[id][r].committer;
        ITrainingRegistryRounds.RoundClaim memory a = _claimOf(id, r); // before the prank (a library call takes it)
        vm.prank(who);
        try rf.proveOmission(a, _recs[id][r].bitmaps, 0, i) {
            if (committer == HONEST) honestConvicted = true;
            return true;
        } catch {
            return false;
        }
    }

    /// @dev The sybil watcher proves trainer `who`'s forced submission of the open round a norm
    /// outlier against the previous round's accepted set.
    function proveNorm(uint256 seed, uint256 who) external step {
        if (tasks.length == 0 || !normProofsOn) return;
        bytes32 id = _task(seed);
        _proveNorm(id, who % M);
    }

    function _proveNorm(bytes32 id, uint256 i) internal returns (bool) {
        if (!_training(id)) return false;
        uint32 r = reg.getRun(id).currentRound;
        if (r == 0 || _recs[id].length < r) return false;
        Sub storage s = _subs[id][opening[id]][i];
        if (!s.forced) return false;
        RoundRec storage p = _recs[id][r - 1];
        ITrainingRegistryEvidence.NormReference memory ref;
        ref.previous = p.roots;
        ref.leaf = p.leaf;
        ref.leafPath = new bytes32[](0);
        ref.entries = new ITrainingRegistryEvidence.ReferenceEntry[](p.leaf.acceptedCount);
        uint256 e;
        for (uint256 j = 0; j < p.bitmaps.length && e < ref.entries.length; ++j) {
            if (p.bitmaps[j] & 1 == 0) continue;
            Sub storage q = _subs[id][p.opening][j];
            ref.entries[e] = ITrainingRegistryEvidence.ReferenceEntry({
                trainerIndex: uint16(j),
                baseRoot: q.base,
                payloadRoot: q.sp.payloadRoot,
                payloadSumsq: q.sp.payloadSumsq,
                cidHash: keccak256(bytes(q.sp.cid)),
                payloadHash: q.sp.payloadHash,
                slotPath: _slotPath(id, p, j),
                signature: q.sp.signature
            });
            ++e;
        }
        vm.prank(WATCH);
        try ev.proveNormOutlier(id, r, 0, trainers[i], s.sp, ref) {
            ++normProofs;
            return true;
        } catch {
            return false;
        }
    }

    // ------------------------------------------------------------ actions: time, end, money

    function warp(uint8 secs) external step {
        _advance(uint256(secs) % 21);
    }

    /// @dev Moves the clock in steps of at most 5 s; the honest parties react after each.
    function _advance(uint256 secs) internal {
        _advanceTo(block.timestamp + secs);
    }

    function _advanceTo(uint256 t) internal {
        while (block.timestamp < t) {
            uint256 next = block.timestamp + 5 < t ? block.timestamp + 5 : t;
            vm.warp(next);
            vm.roll(block.number + 1);
            _syncAll();
            _reflex();
        }
    }

    function seal(uint256 seed) external step {
        if (tasks.length == 0) return;
        try rf.sealRootRun(_task(seed)) {
            ++seals;
        } catch {}
    }

    function claim(uint256 seed, uint256 who) external step {
        if (tasks.length == 0) return;
        bytes32 id = _task(seed);
        uint256 n = _recs[id].length;
        address[] memory list = reg.trainersOf(id);
        if (list.length == 0) return;
        uint16 i = uint16(who % list.length);
        uint256[] memory credits = n == 0 ? new uint256[](list.length) : _recs[id][n - 1].credits;
        (, bytes32[] memory path) = CreditsTree.rootAndPath(CreditsTree.leaves(credits), i);
        try rf.claim(id, i, credits[i], path) {
            ++claims;
        } catch {}
    }

    /// @dev Past the claim period (90 days) anyone sweeps; the clock jumps only when no run is
    /// live (a jump would silence the honest parties, who act at least every 5 s).
    function sweep(uint256 seed) external step {
        if (tasks.length == 0) return;
        if (_liveRuns() == 0) vm.warp(block.timestamp + 91 days);
        try rf.sweep(tasks[seed % tasks.length]) {} catch {}
    }

    function claimFee(uint256 seed, uint8 who) external step {
        if (tasks.length == 0) return;
        address s = who % 3 == 0 ? HONEST : who % 3 == 1 ? ATT1 : ATT2;
        bytes32 id = _task(seed);
        vm.prank(s);
        try reg.claimSyncerFee(id) {} catch {}
    }

    function withdraw(uint8 who) external step {
        address a = _actor(who);
        vm.prank(a);
        try reg.withdraw() returns (uint256 amount) {
            withdrawn += amount;
            if (a == HONEST) honestSyncerWithdrawn += amount;
        } catch {}
    }

    function _actor(uint256 who) internal view returns (address) {
        uint256 k = who % (M + 6);
        if (k < M) return trainers[k];
        if (k == M) return HONEST;
        if (k == M + 1) return ATT1;
        if (k == M + 2) return ATT2;
        if (k == M + 3) return SPONSOR;
        if (k == M + 4) return WATCH;
        return ANYONE;
    }

    function actors() external view returns (address[] memory a) {
        a = new address[](M + 6);
        for (uint256 k = 0; k < M + 6; ++k) {
            a[k] = _actor(k);
        }
    }

    // ------------------------------------------------------------ the honest parties

    /// @dev After every step (and every 5 s of a warp): trainer 0 delivers, answers and proves
    /// omissions; the honest syncer expires lapsed challenges, demands what it cannot fetch,
    /// commits the correct round and answers every challenge of its rounds.
    function _reflex() internal {
        for (uint256 t = 0; t < tasks.length; ++t) {
            bytes32 id = tasks[t];
            ITrainingRegistryTypes.RunView memory v = reg.getRun(id);
            if (v.status == ITrainingRegistryTypes.RunStatus.Training) {
                _honestTrainer(id, v);
                if (v.syncer == HONEST) _honestSyncer(id, v);
                // anyone (a watcher, the honest syncer wanting the fee) elects a run's next syncer
                if (v.syncer == address(0) || block.timestamp > v.syncerReplaceableAt) _elect(id, 1);
            }
            if (
                v.status == ITrainingRegistryTypes.RunStatus.Training
                    || v.status == ITrainingRegistryTypes.RunStatus.Completed
            ) _honestOmissionProofs(id);
        }
        // the honest syncer answers every challenge of its rounds; anyone expires lapsed ones
        for (uint256 p = 0; p < _pending.length;) {
            Pending memory c = _pending[p];
            bool stale = _recs[c.id].length <= c.round || _recs[c.id][c.round].opening != c.opening;
            if (!stale && _recs[c.id][c.round].committer == HONEST && block.timestamp <= c.deadline) {
                if (_answer(p, HONEST)) {
                    _dropPending(p);
                    continue;
                }
            }
            if (block.timestamp > c.deadline && _expire(p)) continue;
            ++p;
        }
    }

    function _honestTrainer(bytes32 id, ITrainingRegistryTypes.RunView memory v) internal {
        (bool found,) = _index(id, trainers[0]);
        if (!found) return;
        Sub storage s = _subs[id][opening[id]][0];
        if (s.committed) {
            (uint64 closes,) = rf.commitPhase(id);
            if (block.timestamp > closes) _reveal(id, 0);
        } else if (!s.exists) {
            _deliver(id, 0, honestVals());
        }
        if (!s.forced) return;
        ITrainingRegistryTypes.AvailabilityChallenge memory c =
            ev.availabilityChallenge(id, v.currentRound, 0, trainers[0]);
        if (c.challenger == address(0)) return;
        ITrainingRegistryTypes.ChunkOpening memory o = c.chunkIndex == WHOLE ? _whole(s.vals, 4) : _open(s.vals, c.chunkIndex);
        vm.prank(trainers[0]);
        try ev.answerAvailability(id, v.currentRound, 0, trainers[0], o) {
            ++availAnswers;
        } catch {}
    }

    function _honestOmissionProofs(bytes32 id) internal {
        uint256 n = _recs[id].length;
        for (uint256 r = 0; r < n; ++r) {
            RoundRec storage rr = _recs[id][r];
            if (!rr.honestForced || rr.bitmaps[0] & 1 == 1) continue;
            if (block.timestamp > rr.committedAt + CH) continue;
            // forge-lint: disable-next-line(unsafe-typecast) -- r < ROUNDS
            if (_proveOmission(id, uint32(r), 0, trainers[0])) return; // rewound: the books changed
        }
    }

    function _honestSyncer(bytes32 id, ITrainingRegistryTypes.RunView memory v) internal {
        bool blocked;
        for (uint256 i = 0; i < M; ++i) {
            ITrainingRegistryTypes.AvailabilityChallenge memory c;
            // trainers[i] need not be enrolled in this run (nor at index i): the view reverts then
            try ev.availabilityChallenge(id, v.currentRound, 0, trainers[i]) returns (
                ITrainingRegistryTypes.AvailabilityChallenge memory x
            ) {
                c = x;
            } catch {
                continue;
            }
            if (c.challenger != address(0)) {
                blocked = true;
                if (block.timestamp > c.deadline) {
                    try ev.expireAvailability(id, v.currentRound, 0, trainers[i]) {
                        ++availExpiries;
                    } catch {}
                }
                continue;
            }
            Sub storage s = _subs[id][opening[id]][i];
            if (!s.forced || s.published == 0xF || !_live(id, v.currentRound, trainers[i])) continue;
            // a forced payload it cannot fetch whole: demand the whole of it
            uint256 bond = ev.challengeBond(id);
            token.mint(HONEST, bond);
            vm.prank(HONEST);
            try ev.challengeAvailability(id, v.currentRound, 0, trainers[i], s.sp, WHOLE) {
                deposited += bond;
                ++wholeChallenges;
                blocked = true;
            } catch {}
        }
        if (blocked) return;
        (uint64 closes, uint16 unrevealed) = rf.commitPhase(id);
        if (block.timestamp <= closes) return;
        if (unrevealed != 0 && block.timestamp <= v.roundDeadline) return;
        _commit(id, HONEST, 0);
    }

    // ------------------------------------------------------------ the end of every run

    /// @dev Drives run `id` to its end with honest parties and silent attackers, only through
    /// calls anyone may make (elections, expiries, the stalled-run cancel, the seal, the
    /// enrollment's close or cancel), 5 s at a time; returns whether it ended and when.
    function driveToEnd(bytes32 id, uint256 maxSeconds) external returns (bool ended, uint256 elapsed) {
        uint256 start = block.timestamp;
        while (block.timestamp - start <= maxSeconds) {
            ITrainingRegistryTypes.RunStatus st = _status(id);
            if (st == ITrainingRegistryTypes.RunStatus.Sealed || st == ITrainingRegistryTypes.RunStatus.Cancelled) {
                return (true, block.timestamp - start);
            }
            if (st == ITrainingRegistryTypes.RunStatus.Enrolling) {
                try reg.closeEnrollment(id) {} catch {}
                vm.prank(ANYONE);
                try ev.cancelTask(id) {} catch {}
            } else {
                ITrainingRegistryTypes.RunView memory v = reg.getRun(id);
                if (
                    st == ITrainingRegistryTypes.RunStatus.Training
                        && (v.syncer == address(0) || block.timestamp > v.syncerReplaceableAt)
                ) {
                    if (_elect(id, 1)) {
                        _syncAll();
                        _reflex();
                        continue;
                    }
                    try ev.cancelStalledRun(id) {
                        ++stalledCancels;
                    } catch {}
                }
                for (uint256 i = 0; i < M; ++i) {
                    try ev.expireAvailability(id, v.currentRound, 0, trainers[i]) {} catch {}
                }
                try rf.sealRootRun(id) {
                    ++seals;
                } catch {}
            }
            _syncAll();
            _reflex();
            st = _status(id);
            if (st == ITrainingRegistryTypes.RunStatus.Sealed || st == ITrainingRegistryTypes.RunStatus.Cancelled) {
                return (true, block.timestamp - start);
            }
            vm.warp(block.timestamp + 5);
            vm.roll(block.number + 1);
            _syncAll();
            _reflex();
        }
        return (false, block.timestamp - start);
    }
}

/// @notice The checks of issue #23's invariants (tokens conserved, an honest syncer keeps its bond,
/// an honest trainer whose submission was available keeps stake and credit, every run ends within
/// the bound), asserted along scripted and seeded campaigns of the handler (`test_reach_*`).
/// The same checks run as fuzzed `invariant_*` campaigns (every handler action, any order, any
/// arguments) and `afterInvariant` drives every run to its end within the bound: 16 runs x 120
/// calls here, 64 x 150 by hand (stop 36). Stop 35 saw all three fail on every seed with an earlier
/// version of this handler, undiagnosed; they hold with this one (whose honest syncer no longer
/// reads a trainer not enrolled in the run, a reverting view that broke afterInvariant's drive). At
/// this depth the campaign does not reach the whole-payload crowd-out (it passes on the contracts
/// before that fix too): ProtocolV3InvariantFindingsTest pins it.
contract ProtocolV3InvariantTest is TestBase {
    ProtocolV3Handler internal h;
    ITrainingRegistryFull internal reg;

    uint256 internal constant GRACE = 30;
    uint256 internal constant CH = 20;
    uint256 internal constant TIMEOUT = 60;
    uint256 internal constant ENROLL = 300;
    uint256 internal constant ROUNDS = 3;

    function setUp() public {
        vm.warp(1_700_000_000);
        h = new ProtocolV3Handler();
        reg = h.reg();
    }

    function targetContracts() public view returns (address[] memory t) {
        t = new address[](1);
        t[0] = address(h);
    }

    struct FuzzSelector {
        address addr;
        bytes4[] selectors;
    }

    /// @dev Every action of the handler, not its test hooks (driveToEnd, setNormProofs).
    function targetSelectors() public view returns (FuzzSelector[] memory t) {
        bytes4[] memory s = new bytes4[](30);
        ProtocolV3Handler x = h;
        (s[0], s[1], s[2], s[3], s[4]) = (x.post.selector, x.enroll.selector, x.closeEnrollment.selector, x.cancel.selector, x.elect.selector);
        (s[5], s[6], s[7], s[8], s[9]) = (x.cancelStalled.selector, x.deliver.selector, x.commitForced.selector, x.reveal.selector, x.unregister.selector);
        (s[10], s[11], s[12], s[13]) = (x.challengeAvail.selector, x.answerAvail.selector, x.expireAvail.selector, x.commitAttacker.selector);
        (s[14], s[15], s[16], s[17]) = (x.challengeSlot.selector, x.challengeWeights.selector, x.answerAsAttacker.selector, x.expireRound.selector);
        (s[18], s[19], s[20], s[21]) = (x.proveAggregate.selector, x.proveOmission.selector, x.proveNorm.selector, x.warp.selector);
        (s[22], s[23], s[24], s[25], s[26]) = (x.seal.selector, x.claim.selector, x.sweep.selector, x.claimFee.selector, x.withdraw.selector);
        // the moves that make rounds happen, twice as likely
        (s[27], s[28]) = (x.commitAttacker.selector, x.warp.selector);
        s[29] = x.slashUnrevealed.selector;
        t = new FuzzSelector[](1);
        t[0] = FuzzSelector(address(h), s);
    }

    function _syncers() internal view returns (address[3] memory s) {
        s = [h.HONEST(), h.ATT1(), h.ATT2()];
    }

    /// forge-config: default.invariant.runs = 16
    /// forge-config: default.invariant.depth = 120
    function invariant_tokensConserved() public view {
        _checkTokensConserved();
    }

    /// forge-config: default.invariant.runs = 16
    /// forge-config: default.invariant.depth = 120
    function invariant_honestSyncerKeepsBond() public view {
        _checkHonestSyncerKeepsBond();
    }

    /// forge-config: default.invariant.runs = 16
    /// forge-config: default.invariant.depth = 120
    function invariant_honestTrainerKeepsStakeAndCredit() public view {
        _checkHonestTrainerKeepsStakeAndCredit();
    }

    /// @dev After each fuzzed campaign: every run still ends within the bound from where it was left.
    function afterInvariant() public {
        _checkEveryRunEnds();
    }

    /// @notice Tokens are conserved: the registry holds exactly what it owes (pools left, trainer
    /// stakes held, unclaimed fees, syncer stakes, withdrawable balances, burned, challenge bonds),
    /// and that is everything deposited less everything withdrawn.
    function _checkTokensConserved() internal view {
        _tokensConserved();
    }

    function _tokensConserved() internal view {
        uint256 held;
        address[3] memory s = _syncers();
        for (uint256 i = 0; i < h.tasksLength(); ++i) {
            bytes32 id = h.tasks(i);
            ITrainingRegistryTypes.RunView memory v = reg.getRun(id);
            held += v.rewardPoolLeft + v.stakeHeld;
            for (uint256 j = 0; j < 3; ++j) {
                held += reg.syncerFeeOf(id, s[j]);
            }
        }
        for (uint256 j = 0; j < 3; ++j) {
            (uint256 stake,,,) = reg.syncerInfo(s[j]);
            held += stake;
        }
        address[] memory a = h.actors();
        for (uint256 i = 0; i < a.length; ++i) {
            held += reg.withdrawable(a[i]);
        }
        held += reg.burned() + h.ev().challengeBondsHeld();
        uint256 bal = h.token().balanceOf(address(reg));
        assertEq(bal, held, "balance = what the registry owes");
        assertEq(bal, h.deposited() - h.withdrawn(), "balance = deposited - withdrawn");
    }

    /// @notice An honest syncer never loses bond: its pool stake is what it registered (it never
    /// withdraws it), and no proof ever convicted a round it committed.
    function _checkHonestSyncerKeepsBond() internal view {
        _honestSyncerKeepsBond();
    }

    function _honestSyncerKeepsBond() internal view {
        (uint256 stake,,,) = reg.syncerInfo(h.HONEST());
        assertEq(stake, 100e18, "the honest syncer lost stake");
        assertTrue(!h.honestConvicted(), "a round of the honest syncer was proven wrong");
        assertTrue(!h.falseProofWon(), "an equivocated aggregate proof convicted a round");
    }

    /// @notice An honest trainer whose submission was available never loses stake or credit: it
    /// is never slashed, and every standing round committed while its forced submission was live
    /// (and so wholly public: it answers every challenge) credits it once the round's window closed.
    function _checkHonestTrainerKeepsStakeAndCredit() internal view {
        _honestTrainer();
    }

    function _honestTrainer() internal view {
        address t0 = h.trainers(0);
        for (uint256 i = 0; i < h.tasksLength(); ++i) {
            bytes32 id = h.tasks(i);
            assertEq(reg.trainerMetrics(id, t0).slashed, 0, "the honest trainer was slashed");
            uint256 n = h.recsLength(id);
            for (uint256 r = 0; r < n; ++r) {
                ProtocolV3Handler.RoundRec memory rr = h.rec(id, r);
                if (!rr.honestForced || block.timestamp <= rr.committedAt + CH) continue;
                assertTrue(rr.bitmaps[0] & 1 == 1, "a standing round left out the honest trainer's live forced payload");
            }
        }
    }

    /// @notice Every run ends: from wherever the campaign left it, honest parties and calls anyone
    /// may make bring each run to Sealed or Cancelled within the bound of PROTOCOL.md §4: per round
    /// grace + 2 * challengeSeconds + syncerTimeout (plus an election per silent syncer, here 3
    /// candidates), then the last window; an Enrolling run within its enrollment window.
    function _checkEveryRunEnds() internal {
        _tokensConserved();
        // a round commits within grace + 2 * challengeSeconds + syncerTimeout of its opening, plus
        // an election (10 s of blocks here) per silent syncer replaced (3 candidates); a pending
        // challenge of a lying round may rewind every committed round once more; then the seal
        // after the last window
        uint256 perRound = GRACE + 2 * CH + TIMEOUT + 10;
        uint256 bound = ENROLL + (2 * ROUNDS + 3) * perRound + 2 * CH + 10;
        for (uint256 i = 0; i < h.tasksLength(); ++i) {
            bytes32 id = h.tasks(i);
            (bool ended, uint256 elapsed) = h.driveToEnd(id, bound);
            assertTrue(ended, "a run did not end within the bound");
            assertTrue(elapsed <= bound, "a run ended past the bound");
        }
        _tokensConserved();
        _honestSyncerKeepsBond();
        _honestTrainer();
        if (REACH_DUMP) _dump();
    }

    bool internal constant REACH_DUMP = false;

    function _dump() internal view {
        string memory o = string.concat("posts ", vm.toString(h.posts()), " forced ", vm.toString(h.forcedReveals()), " honestCommits ", vm.toString(h.honestCommits()), " lying ", vm.toString(h.lyingCommits()));
        o = string.concat(o, " avail ", vm.toString(h.availChallenges()), " whole ", vm.toString(h.wholeChallenges()), " availAns ", vm.toString(h.availAnswers()), " availExp ", vm.toString(h.availExpiries()));
        o = string.concat(o, " slotCh ", vm.toString(h.slotChallenges()), " slotAns ", vm.toString(h.slotAnswers()), " wCh ", vm.toString(h.weightsChallenges()), " wAns ", vm.toString(h.weightsAnswers()));
        o = string.concat(o, " lastSec ", vm.toString(h.lastSecondChallenges()), " aggr ", vm.toString(h.aggregateProofs()), " norm ", vm.toString(h.normProofs()), " convictions ", vm.toString(h.convictions()));
        o = string.concat(o, " repl ", vm.toString(h.replacements()), " stalled ", vm.toString(h.stalledCancels()), " seals ", vm.toString(h.seals()), " claims ", vm.toString(h.claims()));
        revert(o);
    }

    // ------------------------------------------------------------ reach

    event log_named_uint(string key, uint256 val);
    event log_named_address(string key, address val);

    function _log() internal {
        emit log_named_uint("posts", h.posts());
        emit log_named_uint("forced reveals", h.forcedReveals());
        emit log_named_uint("unrevealed commitments slashed", h.unrevealedSlashes());
        emit log_named_uint("honest commits", h.honestCommits());
        emit log_named_uint("lying commits", h.lyingCommits());
        emit log_named_uint("availability challenges (attacker)", h.availChallenges());
        emit log_named_uint("whole-payload challenges (honest syncer)", h.wholeChallenges());
        emit log_named_uint("availability answers", h.availAnswers());
        emit log_named_uint("availability expiries", h.availExpiries());
        emit log_named_uint("slot challenges", h.slotChallenges());
        emit log_named_uint("slot answers", h.slotAnswers());
        emit log_named_uint("weights challenges", h.weightsChallenges());
        emit log_named_uint("weights answers", h.weightsAnswers());
        emit log_named_uint("last-second challenges", h.lastSecondChallenges());
        emit log_named_uint("aggregate proofs", h.aggregateProofs());
        emit log_named_uint("norm proofs", h.normProofs());
        emit log_named_uint("convictions (rewinds)", h.convictions());
        emit log_named_uint("replacements", h.replacements());
        emit log_named_uint("stalled cancels", h.stalledCancels());
        emit log_named_uint("seals", h.seals());
        emit log_named_uint("claims", h.claims());
        for (uint256 i = 0; i < h.tasksLength(); ++i) {
            ITrainingRegistryTypes.RunView memory v = reg.getRun(h.tasks(i));
            emit log_named_uint("run status", uint8(v.status));
            emit log_named_address("  syncer", v.syncer);
            emit log_named_uint("  round", v.currentRound);
            emit log_named_uint("  enrolled", v.enrolledCount);
        }
    }

    /// @dev Posts a run (its 4 trainers enroll, anyone elects); returns its index and syncer.
    function _start() internal returns (uint256 k, bytes32 id, address s) {
        h.post(1);
        k = h.tasksLength() - 1;
        id = h.tasks(k);
        s = reg.getRun(id).syncer;
        emit log_named_address("elected", s);
    }

    /// @dev A run held by the honest syncer (the attackers leave the pool for its draw and come
    /// back), or by an attacker (the honest syncer can hold two runs' bonds, not three).
    function _runHeldBy(bool honest) internal returns (uint256 k, bytes32 id) {
        address s;
        if (honest) {
            h.unregister(false, false);
            h.unregister(true, false);
            (k, id, s) = _start();
            h.unregister(false, true);
            h.unregister(true, true);
            assertEq(s, h.HONEST(), "the only candidate");
            return (k, id);
        }
        for (uint256 j = 0; j < 3; ++j) {
            (k, id, s) = _start();
            if (s != h.HONEST() && s != address(0)) return (k, id);
        }
        revert("no run drawn to an attacker");
    }

    /// @notice The honest side is reached: a withheld forced payload (the honest syncer demands the
    /// whole of it, its trainer publishes it), the honest trainer's forced submission, honest
    /// commits, a slot challenge and a last-second weights challenge answered, an equivocated
    /// aggregate proof refused, the seal and claims; every invariant holds along the way.
    function test_reach_honestSyncerAnswersEverythingAndSeals() public {
        (uint256 k, bytes32 id) = _runHeldBy(true);
        h.deliver(k, 1, 0x01010101);
        h.commitForced(k, 0, 0, true, false); // the honest trainer forces
        h.commitForced(k, 2, 0x02020202, false, false); // withheld
        h.reveal(k, 2);
        assertEq(h.forcedReveals(), 2, "both forced submissions revealed");
        assertEq(h.wholeChallenges(), 1, "the honest syncer demands the withheld payload whole");
        h.answerAvail(k, 2, false);
        assertEq(h.honestCommits(), 1, "honest commit once the payload is public");
        ProtocolV3Handler.RoundRec memory r0 = h.rec(id, 0);
        assertEq(r0.bitmaps[0] + r0.bitmaps[1] + r0.bitmaps[2], 3, "forced and off-chain accepted");
        h.challengeSlot(k, 0, 2, false);
        h.proveAggregate(k, 0, 0, true); // the sybil opens a second payload of its slot
        h.proveAggregate(k, 0, 1, false); // a true proof of a correct round
        h.challengeWeights(k, 0, true, 3, true); // at the last second of the window
        assertEq(h.slotAnswers() + h.weightsAnswers(), 2, "both answered by the honest syncer");
        assertEq(h.lastSecondChallenges(), 1, "last-second challenge");
        assertEq(h.aggregateProofs(), 0, "no proof holds against the honest round");
        for (uint256 j = 0; j < 10 && uint8(reg.getRun(id).status) < 4; ++j) {
            h.warp(30);
            h.seal(k);
        }
        assertEq(uint8(reg.getRun(id).status), uint8(ITrainingRegistryTypes.RunStatus.Sealed), "sealed");
        for (uint256 i = 0; i < 4; ++i) {
            h.claim(k, i);
        }
        assertEq(h.claims(), 4, "claims");
        _log();
        _checkTokensConserved();
        _checkHonestSyncerKeepsBond();
        _checkHonestTrainerKeepsStakeAndCredit();
        _checkEveryRunEnds();
    }

    /// @notice A forced commitment never revealed is slashed once the round is committed, once;
    /// the honest trainer's, revealed, never is; every invariant holds along the way.
    function test_reach_unrevealedCommitmentSlashedNeverTheHonestOne() public {
        (uint256 k, bytes32 id) = _runHeldBy(true);
        h.deliver(k, 1, 0x01010101);
        h.deliver(k, 2, 0x02020202);
        h.commitForced(k, 0, 0, true, false); // the honest trainer forces (and reveals)
        h.commitForced(k, 3, 0x03030303, true, false); // never revealed
        for (uint256 j = 0; j < 10 && h.recsLength(id) == 0; ++j) {
            h.warp(30);
        }
        assertEq(h.recsLength(id), 1, "the honest syncer committed round 0 after its deadline");
        assertEq(h.forcedReveals(), 1, "the honest trainer revealed");
        h.slashUnrevealed(k, 0, 0);
        assertEq(h.unrevealedSlashes(), 0, "the honest trainer's revealed commitment was slashed");
        h.slashUnrevealed(k, 0, 3);
        h.slashUnrevealed(k, 0, 3);
        assertEq(h.unrevealedSlashes(), 1, "slashed once");
        assertTrue(reg.trainerMetrics(id, h.trainers(3)).slashed > 0, "the trainer that never revealed paid nothing");
        _log();
        _checkTokensConserved();
        _checkHonestSyncerKeepsBond();
        _checkHonestTrainerKeepsStakeAndCredit();
        _checkEveryRunEnds();
    }

    /// @notice The attacker side is reached: a last-second availability challenge answered, an
    /// unopenable commit convicted by an unanswered weights challenge (rewind), a wrong-weights
    /// commit convicted by a true aggregate proof, a silent syncer replaced, and the run still
    /// ends; every invariant holds along the way.
    function test_reach_attackersConvictedReplacedAndTheRunEnds() public {
        (uint256 k, bytes32 id) = _runHeldBy(false);
        h.deliver(k, 1, 0x01010101);
        h.deliver(k, 2, 0x02020202);
        h.commitForced(k, 3, 0x03030303, true, false);
        h.reveal(k, 3);
        assertEq(h.forcedReveals(), 1, "forced reveal");
        assertEq(h.recsLength(id), 0, "round 0 open");
        h.challengeAvail(k, 3, 1, false, true);
        assertEq(h.lastSecondChallenges(), 1, "last-second availability challenge");
        h.answerAvail(k, 3, false);
        assertEq(h.availAnswers(), 1, "answered");
        h.commitAttacker(k, 2); // an unopenable fragments root
        assertEq(h.lyingCommits(), 1, "lying commit");
        h.challengeWeights(k, 0, false, 0, false);
        h.warp(20);
        h.warp(5); // unanswered: anyone expires it
        assertEq(h.convictions(), 1, "convicted and rewound");
        assertEq(h.recsLength(id), 0, "round 0 open again");
        // a new syncer; if an attacker, it lies about the weights and a true proof convicts it
        h.elect(k, 1);
        address s = reg.getRun(id).syncer;
        if (s != h.HONEST() && s != address(0)) {
            h.deliver(k, 1, 0x01010101);
            h.deliver(k, 2, 0x02020202);
            h.commitAttacker(k, 1);
            h.proveAggregate(k, 0, 0, false);
            assertEq(h.aggregateProofs(), 1, "true aggregate proof");
            h.elect(k, 1);
            s = reg.getRun(id).syncer;
        }
        if (s != h.HONEST() && s != address(0)) {
            h.warp(120); // silent past its timeout
            h.elect(k, 1);
            assertTrue(h.replacements() >= 1, "replaced");
        }
        (bool ended,) = h.driveToEnd(id, 2_000);
        assertTrue(ended, "the run ended");
        _log();
        _checkTokensConserved();
        _checkHonestSyncerKeepsBond();
        _checkHonestTrainerKeepsStakeAndCredit();
        _checkEveryRunEnds();
    }

    /// @dev One random action of the handler from a random word (the campaign's own mix).
    function _randomAction(uint256 x) internal {
        uint256 a = x % 28;
        uint256 r1 = x >> 8;
        uint256 r2 = x >> 40;
        uint8 b1 = uint8(x >> 72);
        bool f1 = (x >> 80) & 1 == 1;
        bool f2 = (x >> 81) & 1 == 1;
        if (a == 0) h.post(uint16(r1));
        else if (a == 1) h.enroll(r1, r2);
        else if (a == 2) h.closeEnrollment(r1);
        else if (a == 3) h.cancel(r1, f1);
        else if (a == 4 || a == 5) h.elect(r1, b1);
        else if (a == 6) h.cancelStalled(r1);
        else if (a == 7) h.deliver(r1, r2, x >> 96);
        else if (a == 8) h.commitForced(r1, r2, x >> 96, f1, f2);
        else if (a == 9) h.reveal(r1, r2);
        else if (a == 10) h.unregister(f1, f2 || (x >> 82) & 1 == 1);
        else if (a == 11) h.challengeAvail(r1, r2, b1, f1, f2);
        else if (a == 12) h.answerAvail(r1, r2, f1);
        else if (a == 13) h.expireAvail(r1, r2);
        else if (a == 14 || a == 15) h.commitAttacker(r1, b1);
        else if (a == 16) h.challengeSlot(r1, r2, x >> 96, f1);
        else if (a == 17) h.challengeWeights(r1, r2, f1, b1, f2);
        else if (a == 18) h.answerAsAttacker(r1);
        else if (a == 19) h.expireRound(r1);
        else if (a == 20) h.proveAggregate(r1, r2, b1, f1);
        else if (a == 21) h.proveOmission(r1, r2, x >> 96);
        else if (a == 22) h.proveNorm(r1, r2);
        else if (a == 23 || a == 24) h.warp(b1);
        else if (a == 25) h.seal(r1);
        else if (a == 26) h.slashUnrevealed(r1, r2, x >> 96);
        else if (x % 3 == 0) h.claim(r1, r2);
        else if (x % 3 == 1) h.claimFee(r1, b1);
        else h.withdraw(b1);
    }

    /// @notice A seeded random campaign of 400 handler actions in one test (its counters are
    /// logged with -vv, which forge does not show for a passing invariant campaign): it reaches
    /// every kind of challenge, conviction, replacement and the seal, and every invariant holds
    /// after each action and at the end.
    function test_reach_randomCampaign() public {
        h.setNormProofs(true); // (off before the whole-payload fix; holds on seeds tried since)
        uint256 x = uint256(keccak256("v3 campaign"));
        for (uint256 n = 0; n < 400; ++n) {
            x = uint256(keccak256(abi.encode(x)));
            _randomAction(x);
            _checkTokensConserved();
            _checkHonestSyncerKeepsBond();
            _checkHonestTrainerKeepsStakeAndCredit();
        }
        _log();
        _checkEveryRunEnds();
        _log();
        assertTrue(h.honestCommits() > 0, "commits reached");
        assertTrue(h.slotChallenges() + h.weightsChallenges() > 0, "round challenges reached");
        assertTrue(h.seals() + h.stalledCancels() > 0, "an end reached");
    }
}

/// @notice Findings of the campaign, minimized, each kept as a test of its fix: the attack is
/// the one that worked before (a chunk challenge crowding out the whole-payload challenge).
contract ProtocolV3InvariantFindingsTest is RegistryBase {
    ITrainingRegistryFull internal rf;
    bytes32 internal constant ID = keccak256("v3-findings");
    address internal constant SYBIL = address(0x5b1);
    uint32 internal constant WHOLE = type(uint32).max;

    function setUp() public {
        _deploy();
        rf = ITrainingRegistryFull(address(reg));
        _registerSyncer(syncer, MIN_SYNCER_STAKE);
    }

    function _chunk(uint32 v) internal pure returns (bytes memory c) {
        c = new bytes(64);
        c[0] = bytes1(uint8(v >> 24));
        c[1] = bytes1(uint8(v >> 16));
        c[2] = bytes1(uint8(v >> 8));
        c[3] = bytes1(uint8(v));
    }

    /// @dev Chunk k of the attacker's 64-value payload (value 16 k is k + 1) opened against its root.
    function _payload(uint256 k)
        internal
        pure
        returns (bytes32 root, uint32 sumsq, ITrainingRegistryTypes.ChunkOpening memory o)
    {
        uint32[4] memory v = [uint32(0x3F800000), 0x40000000, 0x40400000, 0x40800000];
        bytes32[4] memory h;
        uint32[4] memory s;
        for (uint256 j = 0; j < 4; ++j) {
            (h[j], s[j]) = ChunkMerkle.leaf(_chunk(v[j]));
        }
        (bytes32 l, uint32 ls) = ChunkMerkle.node(h[0], s[0], h[1], s[1]);
        (bytes32 r, uint32 rs) = ChunkMerkle.node(h[2], s[2], h[3], s[3]);
        (root, sumsq) = ChunkMerkle.node(l, ls, r, rs);
        // forge-lint: disable-next-line(unsafe-typecast) -- k < 4
        o.chunkIndex = uint32(k);
        o.chunk = _chunk(v[k]);
        o.siblingH = new bytes32[](2);
        o.siblingS = new uint32[](2);
        (o.siblingH[0], o.siblingS[0]) = (h[k ^ 1], s[k ^ 1]);
        (o.siblingH[1], o.siblingS[1]) = k < 2 ? (r, rs) : (l, ls);
    }

    /// FINDING, fixed (honest syncer lost its bond; attack 5 again through the challenge limit).
    /// MAX_AVAILABILITY_CHALLENGES (3) is shared by everyone; it counted the whole-payload
    /// challenge too. A trainer forces a 4-chunk payload; its sybil challenges chunks 0, 1 and 2
    /// (in the reveal's block, before the syncer can) and the trainer answers each (the sybil's
    /// bonds go to the trainer: the pair pays only gas). Chunk 3 was never public. The syncer's
    /// whole-payload challenge is now counted apart (one per submission): it still opens; unanswered,
    /// the submission lapses and the syncer that leaves it out cannot be convicted of omission.
    function test_challengeLimitDoesNotLockOutTheWholePayloadChallenge() public {
        (address honest, ITrainingRegistryTypes.SignedPayload memory sp) = _forced();

        // the sybil uses up the count on chunks 0..2, the trainer answers each
        uint256 bond = ev.challengeBond(ID);
        _fund(SYBIL, 4 * bond);
        uint256 before = reg.withdrawable(trainers[0]);
        for (uint256 k = 0; k < 3; ++k) {
            vm.prank(SYBIL);
            ev.challengeAvailability(ID, 0, 0, trainers[0], sp, uint32(k));
            (,, ITrainingRegistryTypes.ChunkOpening memory o) = _payload(k);
            vm.prank(trainers[0]);
            ev.answerAvailability(ID, 0, 0, trainers[0], o);
        }
        assertEq(reg.withdrawable(trainers[0]) - before, 3 * bond, "the sybil's bonds went to its trainer");
        _fund(honest, 2 * bond);
        vm.prank(honest);
        vm.expectRevert(
            abi.encodeWithSelector(
                ITrainingRegistryTypes.Registry__ChallengeLimit.selector, ID, uint32(0), uint16(0), trainers[0], uint8(3)
            )
        );
        ev.challengeAvailability(ID, 0, 0, trainers[0], sp, 3);

        // the whole payload can still be demanded, once
        vm.prank(honest);
        ev.challengeAvailability(ID, 0, 0, trainers[0], sp, WHOLE);
        vm.prank(SYBIL);
        vm.expectRevert(
            abi.encodeWithSelector(
                ITrainingRegistryTypes.Registry__ChallengeLimit.selector, ID, uint32(0), uint16(0), trainers[0], uint8(1)
            )
        );
        ev.challengeAvailability(ID, 0, 0, trainers[0], sp, WHOLE);
        _omitUnansweredAndSurvive(honest);
    }

    /// @dev The whole-payload challenge pending against trainer 0 goes unanswered: expired, the
    /// submission lapses; `honest` commits round 0 without it and proveOmission cannot convict.
    function _omitUnansweredAndSurvive(address honest) internal {
        vm.warp(ev.availabilityChallenge(ID, 0, 0, trainers[0]).deadline + 1);
        uint256 withdrawable = reg.withdrawable(honest);
        ev.expireAvailability(ID, 0, 0, trainers[0]);
        assertEq(reg.withdrawable(honest) - withdrawable, ev.challengeBond(ID) + _bounty(), "bond back + bounty");
        ITrainingRegistryRounds.RootCommit memory c;
        c.taskId = ID;
        c.round = 0;
        c.fragmentsRoot = keccak256("the honest syncer's fragments root");
        c.acceptedBitmaps = new uint256[](3);
        c.acceptedBitmaps[1] = 1;
        c.acceptedBitmaps[2] = 1;
        c.previousCredits = new uint256[](3);
        c.fragmentHashes = new bytes32[](1);
        c.transcriptHash = keccak256("transcript");
        c.transcriptCid = "bafkreitranscript";
        vm.prank(honest);
        rf.commitRound(c);
        ITrainingRegistryRounds.RoundClaim memory a;
        a.taskId = ID;
        a.round = 0;
        a.current.fragmentsRoot = c.fragmentsRoot;
        uint256[] memory credits = new uint256[](3);
        credits[1] = 64;
        credits[2] = 64;
        (a.current.creditsRoot,) = CreditsTree.rootAndPath(CreditsTree.leaves(credits), 0);
        a.current.totalCredits = 128;
        a.current.bitmapsHash = keccak256(abi.encodePacked(c.acceptedBitmaps));
        vm.prank(SYBIL);
        vm.expectRevert();
        rf.proveOmission(a, c.acceptedBitmaps, 0, 0);
        (uint256 stake,,,) = reg.syncerInfo(honest);
        assertEq(stake, MIN_SYNCER_STAKE, "the honest syncer keeps its bond");
    }

    /// @dev The bounty of an Unavailable slash of trainer 0's full stake, atto-units.
    function _bounty() internal view returns (uint256) {
        return (MIN_STAKE * TrainingRegistry(address(reg)).INVALID_SLASH_BPS() / 10_000)
            * TrainingRegistry(address(reg)).BOUNTY_BPS() / 10_000;
    }

    /// @dev Opens the 3-trainer, one-fragment (64 values) root-flow run and reveals trainer 0's
    /// forced payload of _payload right after the commit phase; returns the syncer and the payload.
    function _forced() internal returns (address honest, ITrainingRegistryTypes.SignedPayload memory sp) {
        ITrainingRegistryTypes.TaskParams memory p = _params(ID, 3, 2, 1, 2, 1_000e18);
        p.fragmentSizes[0] = 64;
        _post(p);
        for (uint256 i = 0; i < 3; ++i) {
            _enroll(ID, i, MIN_STAKE);
        }
        honest = _elect(ID);
        (bytes32 root, uint32 sumsq,) = _payload(0);
        sp = _signed(0, ID, 0, 0, root, sumsq);
        _force(ID, 0, 0, sp);
    }

    /// FINDING, fixed (honest syncer lost its bond; the invariant campaign, seeds 7 and 9). None
    /// opened later than roundDeadline + challengeSeconds, whoever the syncer. The elected syncer
    /// stays silent while trainer 0's forced payload is withheld from everyone; a successor elected
    /// once the silent one is replaceable (roundDeadline + syncerTimeout, past that window) could
    /// neither demand the payload (Registry__DeadlinePassed) nor leave it out (an omission anyone
    /// proves), so it was replaced in turn and lost its bond. A syncer elected after the deadline
    /// now gets a window of its own, challengeSeconds from its election.
    function test_aSyncerElectedAfterTheWindowCanStillDemandTheWholePayload() public {
        (address silent, ITrainingRegistryTypes.SignedPayload memory sp) = _forced();
        address successor = address(0x5d);
        _registerSyncer(successor, MIN_SYNCER_STAKE);
        ITrainingRegistryTypes.RunView memory v = reg.getRun(ID);
        vm.warp(v.roundDeadline + SYNCER_TIMEOUT + 1);
        assertTrue(block.timestamp > v.roundDeadline + CHALLENGE_SECONDS, "elected after the round's window");
        assertEq(_elect(ID), successor, "the silent syncer is replaced");
        (uint256 stake,,,) = reg.syncerInfo(silent);
        assertEq(stake, MIN_SYNCER_STAKE - reg.getRun(ID).syncerBond, "the silent one lost its bond");

        vm.warp(block.timestamp + CHALLENGE_SECONDS); // the last second of the successor's window
        _fund(successor, ev.challengeBond(ID));
        vm.prank(successor);
        ev.challengeAvailability(ID, 0, 0, trainers[0], sp, WHOLE);
        vm.warp(block.timestamp + 1);
        vm.prank(successor);
        vm.expectRevert(
            abi.encodeWithSelector(
                ITrainingRegistryTypes.Registry__DeadlinePassed.selector, ID, uint32(0), uint64(block.timestamp - 1)
            )
        );
        ev.challengeAvailability(ID, 0, 0, trainers[0], sp, 0); // its window has an end too
        _omitUnansweredAndSurvive(successor);
    }

    /// FINDING, fixed (same class, through time instead of the count; 2 of the 3 challenges sufficed).
    /// One challenge is pending per submission at a time, and none opens after roundDeadline +
    /// challengeSeconds. The trainer reveals at the end of the commit phase; its sybil challenges
    /// chunk 0 in the same block; at that challenge's deadline the trainer answers and the sybil
    /// challenges chunk 1 in the same transaction (a contract of theirs), whose deadline is past
    /// the last second a challenge may open. The honest syncer's whole-payload challenge met
    /// Registry__ChallengePending for the whole window; now it takes the pending chunk
    /// challenge's place (that bond goes back to the sybil), up to the window's last second.
    function test_pendingChunkChallengesDoNotCrowdOutTheWholePayloadChallenge() public {
        (address honest, ITrainingRegistryTypes.SignedPayload memory sp) = _forced();
        uint256 bond = ev.challengeBond(ID);
        _fund(SYBIL, 2 * bond);
        _fund(honest, bond);
        uint64 lastOpen = reg.getRun(ID).roundDeadline + CHALLENGE_SECONDS;
        vm.prank(SYBIL);
        ev.challengeAvailability(ID, 0, 0, trainers[0], sp, 0);
        uint64 first = uint64(block.timestamp) + CHALLENGE_SECONDS;
        vm.warp(first); // the trainer answers at the last second, its sybil challenges again at once
        (,, ITrainingRegistryTypes.ChunkOpening memory o0) = _payload(0);
        vm.prank(trainers[0]);
        ev.answerAvailability(ID, 0, 0, trainers[0], o0);
        vm.prank(SYBIL);
        ev.challengeAvailability(ID, 0, 0, trainers[0], sp, 1);
        assertTrue(block.timestamp + CHALLENGE_SECONDS > lastOpen, "the second outlasts the window");

        // at the window's last second the syncer's whole-payload challenge replaces the pending one
        vm.warp(lastOpen);
        uint256 sybilBefore = reg.withdrawable(SYBIL);
        uint256 held = ev.challengeBondsHeld();
        vm.prank(honest);
        ev.challengeAvailability(ID, 0, 0, trainers[0], sp, WHOLE);
        assertEq(reg.withdrawable(SYBIL) - sybilBefore, bond, "the replaced challenge's bond went back");
        assertEq(ev.challengeBondsHeld(), held, "one bond held: the whole-payload challenge's");
        ITrainingRegistryTypes.AvailabilityChallenge memory p = ev.availabilityChallenge(ID, 0, 0, trainers[0]);
        assertEq(p.challenger, honest, "the syncer holds the challenge");
        assertEq(p.chunkIndex, WHOLE, "of the whole payload");
        assertEq(p.deadline, lastOpen + CHALLENGE_SECONDS, "settled within the round's bound");

        // a chunk challenge cannot take it back; the trainer cannot answer it with one chunk
        vm.prank(SYBIL);
        vm.expectRevert(
            abi.encodeWithSelector(
                ITrainingRegistryTypes.Registry__ChallengePending.selector, ID, uint32(0), uint16(0), trainers[0]
            )
        );
        ev.challengeAvailability(ID, 0, 0, trainers[0], sp, 2);
        (,, ITrainingRegistryTypes.ChunkOpening memory o1) = _payload(1);
        vm.prank(trainers[0]);
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__BadOpening.selector, uint32(1)));
        ev.answerAvailability(ID, 0, 0, trainers[0], o1);
        _omitUnansweredAndSurvive(honest);
    }
}
