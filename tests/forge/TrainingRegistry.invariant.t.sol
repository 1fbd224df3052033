// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {ITrainingRegistryFull} from "../../contracts/interfaces/ITrainingRegistryFull.sol";
import {ITrainingRegistryTypes} from "../../contracts/interfaces/ITrainingRegistryTypes.sol";
import {TestBase, Vm} from "./lib/Cheats.sol";
import {deployRegistry} from "./lib/DeployRegistry.sol";
import {ITrainingRegistry} from "../../contracts/interfaces/ITrainingRegistry.sol";
import {MockERC20} from "../../contracts/mocks/MockERC20.sol";
import {ITrainingRegistryEvidence} from "../../contracts/interfaces/ITrainingRegistryEvidence.sol";
import {ChunkMerkle} from "../../contracts/lib/ChunkMerkle.sol";
import {ITrainingRegistryRounds} from "../../contracts/interfaces/ITrainingRegistryRounds.sol";
import {CreditsTree} from "./lib/CreditsTree.sol";
import {RoundProofs} from "../../contracts/lib/RoundProofs.sol";

/// @notice Drives random sequences of registry calls (post, elect in two steps, enroll, close
/// enrollment, force sound or non-finite payloads (commit, then reveal), prove invalid,
/// challenge / answer / expire availability, commit by root, warp, roll, seal, claim, sweep,
/// cancel, claim fees, withdraw) with two syncer candidates, and
/// keeps ghost books the invariants compare with. Payloads have at most 16 values, so a
/// commitment is the leaf of its one chunk.
contract RegistryHandler is TestBase {
    uint256 internal constant MIN_STAKE = 10e18;
    uint256 internal constant N_TRAINERS = 5;

    MockERC20 public token;
    ITrainingRegistryFull public reg;
    ITrainingRegistryEvidence public ev;
    address public syncer = address(0x5c);
    address public syncer2 = address(0x5d);
    address public sponsor = address(0x5905);
    uint256[] internal keys;
    address[] public trainers;
    bytes32[] public tasks;

    uint256 public deposited; // everything ever transferred into the registry
    uint256 public withdrawn; // everything ever withdrawn
    mapping(address account => uint256) public withdrawnBy;
    bool public nonSyncerCommitted; // set if a commit by someone other than the syncer succeeded
    bool public sealedTwice; // set if a second seal of a run succeeded
    uint256 public seals; // successful seals (progress check: runs do reach the seal)
    uint256 public replacements; // successful elections that replaced a syncer (its bond burned)
    address public prover = address(0x9407);
    address public challenger = address(0xC4A1);
    bool public slashedWithoutEvidence; // set if proveInvalid succeeded on a sound payload
    uint256 public proofs; // successful proveInvalid calls
    mapping(address trainer => uint256) public bondsReceived; // challenge bonds paid to a trainer
    mapping(bytes32 key => ITrainingRegistryTypes.SignedPayload) internal _signedOf;
    mapping(bytes32 key => bytes) internal _chunkOf;
    mapping(bytes32 key => bool) internal _defective;
    // rounds by root (PROTOCOL.md §5): the credits the handler committed, what claims should pay
    mapping(bytes32 taskId => uint256[]) internal _rootCredits; // cumulative, by trainer index
    mapping(bytes32 taskId => uint256) public rootTotal;
    mapping(bytes32 taskId => uint256) public claimablePool; // rewardPoolLeft right after sealRootRun
    mapping(bytes32 taskId => uint256) public claimedTotal; // expected rewards of successful claims
    mapping(address trainer => uint256) public rootRewards; // expected rewards of its claims
    bool public overClaimed; // set if a claim paid other than floor(pool * credits / total)
    uint256 public rootCommits;
    uint256 public rootReveals; // root-flow forced submissions revealed (commit, then reveal)
    uint256 public rootClaims;

    constructor() {
        token = new MockERC20();
        reg = deployRegistry(token, 100e18, 60, 0);
        ev = ITrainingRegistryEvidence(address(reg));
        for (uint256 i = 0; i < N_TRAINERS; ++i) {
            keys.push(0xB0B + i);
            trainers.push(vm.addr(0xB0B + i));
            _approve(trainers[i]);
        }
        _approve(sponsor);
        _approve(challenger);
        _register(syncer, 100e18);
        _register(syncer2, 150e18);
    }

    function _register(address who, uint256 amount) internal {
        _approve(who);
        token.mint(who, amount);
        vm.prank(who);
        reg.registerSyncer(amount);
        deposited += amount;
        vm.roll(block.number + 1); // stake counts in elections requested from the next block on
    }

    function _approve(address who) internal {
        vm.prank(who);
        token.approve(address(reg), type(uint256).max);
    }

    function tasksLength() external view returns (uint256) {
        return tasks.length;
    }

    function trainersLength() external pure returns (uint256) {
        return N_TRAINERS;
    }

    function _task(uint256 seed) internal view returns (bytes32) {
        return tasks[seed % tasks.length];
    }

    // ------------------------------------------------------------ actions

    function postTask(uint96 pool, uint8 shape) external {
        if (tasks.length >= 3) return;
        bytes32 id = keccak256(abi.encode("inv", tasks.length));
        ITrainingRegistryTypes.TaskParams memory p;
        p.taskId = id;
        p.specHash = id;
        p.specCid = "cid";
        p.initialWeightsRoot = id;
        p.trainerCount = uint16(2 + shape % 3); // 2..4
        p.quorum = uint16(1 + (shape / 3) % p.trainerCount);
        p.fragmentCount = uint16(1 + (shape / 12) % 3); // 1..3
        p.innerSteps = 1;
        p.maxRounds = uint32(1 + (shape / 36) % 2);
        p.graceWindowMs = 30_000;
        p.minStake = MIN_STAKE;
        p.rewardPool = pool;
        p.fragmentSizes = new uint64[](p.fragmentCount);
        for (uint256 j = 0; j < p.fragmentCount; ++j) {
            p.fragmentSizes[j] = uint64(5 + 5 * j); // 5..15 values: one chunk
        }
        p.enrollmentSeconds = 300;
        p.syncerFeeBps = shape % 2 == 0 ? 0 : 700;
        p.syncerBond = 40e18 + uint256(shape % 4) * 10e18; // 40..70: sometimes only one candidate covers two
        p.normScreenSq = 0x42C80000; // 100.0
        p.challengeSeconds = 20;
        token.mint(sponsor, pool);
        vm.prank(sponsor);
        reg.postTask(p);
        tasks.push(id);
        deposited += pool;
        vm.prank(sponsor);
        ITrainingRegistryRounds(address(reg))
            .useRootFlow(
                id,
                id,
                ITrainingRegistryRounds.OuterRule({lr: 0x3F333333, mu: 0x3F666666, nesterov: true, alphaBps: 0})
            );
    }

    // ------------------------------------------------------------ root flow

    /// @dev The syncer (or a stranger) commits the open round of a root-flow run: fragment j
    /// accepted from the first counts[j] trainers (counts from `countsSeed`, sometimes above the
    /// quorum, sometimes below), from the ghost books' previous credits; the registry sums the
    /// credits, the handler mirrors them.
    function commitRoot(uint256 seed, uint256 countsSeed, bool asStranger) external {
        if (tasks.length == 0) return;
        bytes32 id = _task(seed);
        ITrainingRegistryTypes.RunView memory v = reg.getRun(id);
        if (v.status != ITrainingRegistryTypes.RunStatus.Training) return;
        uint256 m = reg.trainersOf(id).length;
        ITrainingRegistryRounds.RootCommit memory c;
        c.taskId = id;
        c.round = v.currentRound;
        c.acceptedBitmaps = new uint256[](m);
        c.previousCredits = new uint256[](m);
        uint256[] memory next = new uint256[](m);
        uint256[] storage ghost = _rootCredits[id];
        for (uint256 i = 0; i < ghost.length; ++i) {
            (c.previousCredits[i], next[i]) = (ghost[i], ghost[i]);
        }
        c.fragmentHashes = new bytes32[](v.fragmentCount);
        uint256 added;
        for (uint256 j = 0; j < v.fragmentCount; ++j) {
            uint256 count = (countsSeed >> (8 * j)) % (m + 1);
            c.fragmentHashes[j] = keccak256(abi.encode(id, c.round, j));
            for (uint256 i = 0; i < count; ++i) {
                c.acceptedBitmaps[i] |= uint256(1) << j;
                next[i] += v.fragmentSizes[j];
            }
            added += uint256(v.fragmentSizes[j]) * count;
        }
        c.fragmentsRoot = keccak256(abi.encode("fragments", id, c.round));
        address caller = asStranger ? address(0xBAD) : v.syncer;
        // an early commit waits for the end of the round's commit phase
        try ITrainingRegistryRounds(address(reg)).commitPhase(id) returns (uint64 closes, uint16) {
            if (block.timestamp <= closes) vm.warp(closes + 1);
        } catch {}
        vm.prank(caller);
        try ITrainingRegistryRounds(address(reg)).commitRound(c) {
            if (caller != v.syncer) nonSyncerCommitted = true;
            _rootCredits[id] = next;
            rootTotal[id] += added;
            ++rootCommits;
        } catch {}
    }

    function sealRoot(uint256 seed) external {
        if (tasks.length == 0) return;
        bytes32 id = _task(seed);
        bool wasSealed = reg.getRun(id).status == ITrainingRegistryTypes.RunStatus.Sealed;
        try ITrainingRegistryRounds(address(reg)).sealRootRun(id) {
            if (wasSealed) sealedTwice = true;
            claimablePool[id] = reg.getRun(id).rewardPoolLeft;
            ++seals;
        } catch {}
    }

    /// @dev Anyone claims for trainer `who` of a sealed root-flow run, with its ghost credits.
    function claimRoot(uint256 seed, uint256 who) external {
        if (tasks.length == 0) return;
        bytes32 id = _task(seed);
        address[] memory list = reg.trainersOf(id);
        if (list.length == 0) return;
        uint16 i = uint16(who % list.length);
        uint256[] memory credits = _rootCredits[id];
        if (credits.length != list.length) credits = new uint256[](list.length);
        (, bytes32[] memory path) = CreditsTree.rootAndPath(CreditsTree.leaves(credits), i);
        uint256 before = reg.withdrawable(list[i]);
        try ITrainingRegistryRounds(address(reg)).claim(id, i, credits[i], path) {
            uint256 expected = rootTotal[id] == 0 ? 0 : (claimablePool[id] * credits[i]) / rootTotal[id];
            if (reg.withdrawable(list[i]) - before != expected) overClaimed = true;
            claimedTotal[id] += expected;
            rootRewards[list[i]] += expected;
            ++rootClaims;
        } catch {}
    }

    /// @dev The credits root the registry should hold for `id`: the root of the cumulative
    /// credits the handler committed, 0 before its first commit.
    function expectedCreditsRoot(bytes32 id) external view returns (bytes32 root) {
        uint256[] memory credits = _rootCredits[id];
        if (credits.length != 0) (root,) = CreditsTree.rootAndPath(CreditsTree.leaves(credits), 0);
    }

    /// @dev Past the claim period (90 days), anyone sweeps the rest to the sponsor.
    function sweepRoot(uint256 seed) external {
        if (tasks.length == 0) return;
        vm.warp(block.timestamp + 91 days);
        try ITrainingRegistryRounds(address(reg)).sweep(_task(seed)) {} catch {}
    }

    /// @dev Both steps of an election (request, next block, resolve), each allowed to fail.
    function electSyncer(uint256 seed) external {
        if (tasks.length == 0) return;
        bytes32 id = _task(seed);
        try reg.requestSyncerElection(id) {} catch {}
        vm.roll(block.number + 1 + seed % 3);
        address previous = reg.getRun(id).syncer;
        try reg.electSyncer(id) {
            if (previous != address(0)) ++replacements;
        } catch {}
    }

    function closeEnrollment(uint256 seed) external {
        if (tasks.length == 0) return;
        try reg.closeEnrollment(_task(seed)) {} catch {}
    }

    function claimFee(uint256 seed, bool second) external {
        if (tasks.length == 0) return;
        vm.prank(second ? syncer2 : syncer);
        try reg.claimSyncerFee(_task(seed)) {} catch {}
    }

    function enroll(uint256 seed, uint256 who, uint64 extra) external {
        if (tasks.length == 0) return;
        address t = trainers[who % N_TRAINERS];
        uint256 stake = MIN_STAKE + extra;
        token.mint(t, stake);
        vm.prank(t);
        try reg.enrollTrainer(_task(seed), stake, "did:inv") {
            deposited += stake;
        } catch {}
    }

    function _key(bytes32 id, uint32 round, uint256 i, uint16 f) internal pure returns (bytes32) {
        return keccak256(abi.encode(id, round, i, f));
    }

    /// @dev n values of 1.0 (or NaN when `bad`), padded with +0 to one 64-byte chunk.
    function _payloadChunk(uint256 n, bool bad) internal pure returns (bytes memory chunk) {
        chunk = new bytes(64);
        bytes4 word = bad ? bytes4(0x7FC00000) : bytes4(0x3F800000);
        for (uint256 j = 0; j < n; ++j) {
            for (uint256 b = 0; b < 4; ++b) {
                chunk[4 * j + b] = word[b];
            }
        }
    }

    function _signedPayload(bytes32 id, uint256 i, uint16 f, bytes memory chunk)
        internal
        view
        returns (ITrainingRegistryTypes.SignedPayload memory sp)
    {
        ITrainingRegistryTypes.RunView memory v = reg.getRun(id);
        (sp.payloadRoot, sp.payloadSumsq) = ChunkMerkle.leaf(chunk);
        sp.cid = "c";
        sp.payloadHash = keccak256(abi.encode(id, i, v.currentRound, f));
        (uint8 sv, bytes32 r, bytes32 s_) =
            vm.sign(keys[i], reg.outerGradientDigest(id, v.currentRound, f, v.weightsRoot, sp));
        sp.signature = abi.encodePacked(r, s_, sv);
    }

    /// @dev Trainer `who` forces fragment `fragment` of the open round (commit, then reveal): n
    /// values of 1.0, or of NaN when `bad`.
    function submit(uint256 seed, uint256 who, uint16 fragment, bool bad) external {
        if (tasks.length == 0) return;
        bytes32 id = _task(seed);
        ITrainingRegistryTypes.RunView memory v = reg.getRun(id);
        uint256 i = who % N_TRAINERS;
        uint16 f = uint16(fragment % (v.fragmentCount + 1)); // sometimes out of range
        bytes memory chunk = _payloadChunk(f < v.fragmentCount ? v.fragmentSizes[f] : 16, bad);
        ITrainingRegistryTypes.SignedPayload memory sp = _signedPayload(id, i, f, chunk);
        _commitThenRevealPhase(id, i, f, sp);
        try reg.submitOuterGradient(id, v.currentRound, f, sp) {
            ++rootReveals;
            bytes32 k = _key(id, v.currentRound, i, f);
            _signedOf[k] = sp;
            _chunkOf[k] = chunk;
            _defective[k] = bad;
        } catch {}
    }

    /// @dev Trainer i commits to `sp` (when the commit phase is open), then the clock
    /// moves past the phase so that the reveal can go.
    function _commitThenRevealPhase(bytes32 id, uint256 i, uint16 f, ITrainingRegistryTypes.SignedPayload memory sp)
        internal
    {
        ITrainingRegistryTypes.RunView memory v = reg.getRun(id);
        bytes32 sh = RoundProofs.structHash(
            id, v.currentRound, f, v.weightsRoot, sp.payloadRoot, sp.payloadSumsq, sp.cid, sp.payloadHash
        );
        vm.prank(trainers[i]);
        try ev.commitSubmission(id, v.currentRound, f, keccak256(abi.encode(sh, trainers[i]))) {} catch {}
        try ITrainingRegistryRounds(address(reg)).commitPhase(id) returns (uint64 closes, uint16) {
            if (block.timestamp <= closes) vm.warp(closes + 1);
        } catch {}
    }

    function _opening(bytes32 k) internal view returns (ITrainingRegistryTypes.ChunkOpening memory o) {
        o.chunk = _chunkOf[k];
        o.siblingH = new bytes32[](0);
        o.siblingS = new uint32[](0);
    }

    /// @dev Anyone tries to prove a submission non-finite (or, with `padding`, badly padded)
    /// by opening its one chunk.
    function proveInvalid(uint256 seed, uint256 who, uint16 fragment, bool padding) external {
        if (tasks.length == 0) return;
        bytes32 id = _task(seed);
        uint32 round = reg.getRun(id).currentRound;
        uint256 i = who % N_TRAINERS;
        uint16 f = fragment % 3;
        bytes32 k = _key(id, round, i, f);
        if (_chunkOf[k].length == 0) return;
        uint8 reason = padding ? 2 : 3;
        vm.prank(prover);
        try ev.proveInvalid(id, round, f, trainers[i], reason, _signedOf[k], _opening(k)) {
            ++proofs;
            if (!_defective[k] || padding) slashedWithoutEvidence = true;
        } catch {}
    }

    function challenge(uint256 seed, uint256 who, uint16 fragment) external {
        if (tasks.length == 0) return;
        bytes32 id = _task(seed);
        uint32 round = reg.getRun(id).currentRound;
        uint256 i = who % N_TRAINERS;
        uint16 f = fragment % 3;
        bytes32 k = _key(id, round, i, f);
        if (_chunkOf[k].length == 0) return;
        token.mint(challenger, ev.challengeBond(id));
        vm.prank(challenger);
        try ev.challengeAvailability(id, round, f, trainers[i], _signedOf[k], 0) {
            deposited += ev.challengeBond(id);
        } catch {}
    }

    function answer(uint256 seed, uint256 who, uint16 fragment, uint32 back) external {
        if (tasks.length == 0) return;
        bytes32 id = _task(seed);
        uint32 round = reg.getRun(id).currentRound;
        round = round >= back % 2 ? round - back % 2 : round; // sometimes the round before
        uint256 i = who % N_TRAINERS;
        uint16 f = fragment % 3;
        bytes32 k = _key(id, round, i, f);
        if (_chunkOf[k].length == 0) return;
        uint256 bond = ev.availabilityChallenge(id, round, f, trainers[i]).bond;
        try ev.answerAvailability(id, round, f, trainers[i], _opening(k)) {
            bondsReceived[trainers[i]] += bond;
        } catch {}
    }

    function expire(uint256 seed, uint256 who, uint16 fragment, uint32 back) external {
        if (tasks.length == 0) return;
        bytes32 id = _task(seed);
        uint32 round = reg.getRun(id).currentRound;
        round = round >= back % 2 ? round - back % 2 : round;
        try ev.expireAvailability(id, round, fragment % 3, trainers[who % N_TRAINERS]) {} catch {}
    }

    function warp(uint16 secs) external {
        vm.warp(block.timestamp + secs % 200);
        vm.roll(block.number + 1);
    }

    function cancel(uint256 seed, bool asStranger) external {
        if (tasks.length == 0) return;
        vm.prank(asStranger ? address(0xBAD) : sponsor);
        try ev.cancelTask(_task(seed)) {} catch {}
    }

    function withdraw(uint256 who) external {
        address a = who % 5 == 0 ? syncer2 : who % 4 == 0 ? syncer : who % 3 == 0 ? sponsor : trainers[who % N_TRAINERS];
        vm.prank(a);
        try reg.withdraw() returns (uint256 amount) {
            withdrawn += amount;
            withdrawnBy[a] += amount;
        } catch {}
    }
}

/// @notice Invariants of the registry under random call sequences.
contract TrainingRegistryInvariantTest is TestBase {
    RegistryHandler internal h;
    ITrainingRegistryFull internal reg;

    function setUp() public {
        vm.warp(1_700_000_000);
        h = new RegistryHandler();
        reg = h.reg();
    }

    /// @dev forge fuzzes only the handler.
    function targetContracts() public view returns (address[] memory t) {
        t = new address[](1);
        t[0] = address(h);
    }

    function _accounts() internal view returns (address[] memory a) {
        uint256 n = h.trainersLength();
        a = new address[](n + 5);
        for (uint256 i = 0; i < n; ++i) {
            a[i] = h.trainers(i);
        }
        a[n] = h.sponsor();
        a[n + 1] = h.syncer();
        a[n + 2] = h.syncer2();
        a[n + 3] = h.prover();
        a[n + 4] = h.challenger();
    }

    function _syncers() internal view returns (address[] memory s) {
        s = new address[](2);
        s[0] = h.syncer();
        s[1] = h.syncer2();
    }

    /// @notice Tokens are conserved: the registry's balance = reward pools left + stakes held
    /// + unclaimed syncer fees + syncer stakes + credited-but-unwithdrawn + burned
    /// = deposited - withdrawn.
    function invariant_tokensConserved() public view {
        uint256 held;
        address[] memory s = _syncers();
        for (uint256 i = 0; i < h.tasksLength(); ++i) {
            bytes32 id = h.tasks(i);
            ITrainingRegistryTypes.RunView memory v = reg.getRun(id);
            held += v.rewardPoolLeft + v.stakeHeld;
            for (uint256 j = 0; j < s.length; ++j) {
                held += reg.syncerFeeOf(id, s[j]);
            }
        }
        for (uint256 j = 0; j < s.length; ++j) {
            (uint256 syncerStake,,,) = reg.syncerInfo(s[j]);
            held += syncerStake;
        }
        address[] memory a = _accounts();
        for (uint256 i = 0; i < a.length; ++i) {
            held += reg.withdrawable(a[i]);
        }
        held += reg.burned() + h.ev().challengeBondsHeld();
        uint256 bal = h.token().balanceOf(address(reg));
        assertEq(bal, held, "balance = pools + stakes + fees + syncer stakes + withdrawable + burned");
        assertEq(bal, h.deposited() - h.withdrawn(), "balance = deposited - withdrawn");
    }

    /// @notice Bond accounting: each candidate's locked stake is exactly the bonds of the runs it
    /// is the syncer of and that are not settled yet, it is never more than its stake, and its
    /// active-task count is the number of those runs.
    function invariant_bondsAccounted() public view {
        address[] memory s = _syncers();
        for (uint256 j = 0; j < s.length; ++j) {
            uint256 bonds;
            uint256 runs;
            for (uint256 i = 0; i < h.tasksLength(); ++i) {
                ITrainingRegistryTypes.RunView memory v = reg.getRun(h.tasks(i));
                bool live = v.status == ITrainingRegistryTypes.RunStatus.Training
                    || v.status == ITrainingRegistryTypes.RunStatus.Completed;
                if (live && v.syncer == s[j]) {
                    bonds += v.syncerBond;
                    ++runs;
                }
            }
            (uint256 stake, uint32 active, bool registered, uint256 locked) = reg.syncerInfo(s[j]);
            assertEq(locked, bonds, "locked = bonds of live runs");
            assertEq(active, runs, "active tasks = live runs");
            assertTrue(locked <= stake, "locked <= stake");
            assertTrue(registered || locked == 0, "only candidates hold bonds");
        }
    }

    /// @notice Nothing is credited twice: a run's credits root is the root of the credits the
    /// handler committed and its total their sum, and claims pay no more than the pool.
    function invariant_nothingCreditedTwice() public view {
        for (uint256 i = 0; i < h.tasksLength(); ++i) {
            bytes32 id = h.tasks(i);
            ITrainingRegistryTypes.RunView memory v = reg.getRun(id);
            (,, bytes32 creditsRoot,) = reg.rootState(id);
            assertEq(creditsRoot, h.expectedCreditsRoot(id), "credits root = root of the committed credits");
            assertEq(h.rootTotal(id), v.totalCredits, "total credits");
            // claims never pay more than the pool the seal left for them
            assertTrue(h.claimedTotal(id) <= h.claimablePool(id), "claims <= claimable pool");
        }
        assertTrue(!h.sealedTwice(), "sealed twice");
        assertTrue(!h.overClaimed(), "a claim paid other than floor(pool * credits / total)");
    }

    /// @notice Nothing is paid before the seal: what a trainer has been credited (withdrawable
    /// + withdrawn) equals the sum of its payouts over sealed or cancelled runs, exactly.
    function invariant_nothingPaidBeforeSeal() public view {
        uint256 n = h.trainersLength();
        for (uint256 k = 0; k < n; ++k) {
            address t = h.trainers(k);
            uint256 owed;
            for (uint256 i = 0; i < h.tasksLength(); ++i) {
                bytes32 id = h.tasks(i);
                ITrainingRegistryTypes.RunStatus s = reg.getRun(id).status;
                if (s != ITrainingRegistryTypes.RunStatus.Sealed && s != ITrainingRegistryTypes.RunStatus.Cancelled) {
                    continue;
                }
                ITrainingRegistryTypes.TrainerMetrics memory m = reg.trainerMetrics(id, t);
                if (!m.enrolled) continue;
                owed += m.stake - m.slashed; // stakes come back at the settlement, rewards by claim
            }
            assertEq(
                reg.withdrawable(t) + h.withdrawnBy(t),
                owed + h.bondsReceived(t) + h.rootRewards(t),
                "credited = stakes of settled runs + bonds + claims"
            );
        }
    }

    /// @notice The handler's actions reach the states the invariants are about: a sealed run and
    /// a replaced syncer (so the books above are checked across both).
    function test_handlerReachesSealAndReplacement() public {
        h.postTask(1_000e18, 1); // M = 3, K = 1, F = 1, one round, 7 % fee
        for (uint256 i = 0; i < 3; ++i) {
            h.enroll(0, i, 0);
        }
        h.electSyncer(0);
        h.submit(0, 0, 0, false);
        h.commitRoot(0, 3, false);
        h.warp(21); // past the challenge window (20 s)
        h.sealRoot(0);
        assertEq(h.seals(), 1, "sealed");
        h.postTask(1_000e18, 1);
        for (uint256 i = 0; i < 3; ++i) {
            h.enroll(1, i, 0);
        }
        h.electSyncer(1);
        h.warp(199); // past the deadline (30 s) + the syncer timeout (60 s)
        h.electSyncer(1);
        assertEq(h.replacements(), 1, "replaced");
        assertTrue(reg.burned() > 0, "bond burned");
        invariant_tokensConserved();
        invariant_bondsAccounted();
    }

    /// @notice The handler's root-flow actions reach commits, the seal and claims (so the books
    /// above are checked across them), and the claims plus the sweep pay out the whole pool.
    function test_handlerReachesRootFlowClaims() public {
        h.postTask(1_000e18, 1); // M = 3, K = 1, F = 1, one round, 7 % fee
        for (uint256 i = 0; i < 3; ++i) {
            h.enroll(0, i, 0);
        }
        h.electSyncer(0);
        h.submit(0, 0, 0, false); // trainer 0's forced submission: commit, then reveal
        assertEq(h.rootReveals(), 1, "revealed");
        h.commitRoot(0, 2, false); // two of three trainers accepted (trainer 0 among them)
        assertEq(h.rootCommits(), 1, "committed");
        h.warp(21); // past the challenge window (20 s)
        h.sealRoot(0);
        assertEq(h.seals(), 1, "sealed");
        for (uint256 i = 0; i < 3; ++i) {
            h.claimRoot(0, i);
        }
        assertEq(h.rootClaims(), 3, "claimed");
        h.sweepRoot(0);
        assertEq(reg.getRun(h.tasks(0)).rewardPoolLeft, 0, "swept");
        invariant_tokensConserved();
        invariant_nothingCreditedTwice();
        invariant_nothingPaidBeforeSeal();
    }

    /// @notice Only the syncer commits a round.
    function invariant_onlySyncerCommits() public view {
        assertTrue(!h.nonSyncerCommitted(), "a non-syncer committed");
    }

    /// @notice No slash without evidence: every successful proveInvalid opened a non-finite chunk.
    function invariant_noSlashWithoutEvidence() public view {
        assertTrue(!h.slashedWithoutEvidence(), "slashed on a sound payload");
    }
}
