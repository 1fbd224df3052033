// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {ITrainingRegistryTypes} from "../../contracts/interfaces/ITrainingRegistryTypes.sol";
import {TestBase} from "./lib/Cheats.sol";
import {ITrainingRegistryFull} from "../../contracts/interfaces/ITrainingRegistryFull.sol";
import {deployRegistry} from "./lib/DeployRegistry.sol";
import {ITrainingRegistry} from "../../contracts/interfaces/ITrainingRegistry.sol";
import {MockERC20} from "../../contracts/mocks/MockERC20.sol";
import {ITrainingRegistryEvidence} from "../../contracts/interfaces/ITrainingRegistryEvidence.sol";
import {ITrainingRegistryRounds} from "../../contracts/interfaces/ITrainingRegistryRounds.sol";
import {RoundProofs} from "../../contracts/lib/RoundProofs.sol";
import {CreditsTree} from "./lib/CreditsTree.sol";

/// @notice Shared fixtures of the registry's forge tests: a token, a registry, a sponsor,
/// a syncer candidate and trainers with known keys (they sign EIP-712 with vm.sign).
abstract contract RegistryBase is TestBase {
    uint256 internal constant MIN_SYNCER_STAKE = 100e18;
    uint32 internal constant SYNCER_TIMEOUT = 60;
    uint256 internal constant MIN_STAKE = 10e18;
    uint64 internal constant GRACE_MS = 30_000;
    uint32 internal constant ENROLL_SECONDS = 1 days;
    uint256 internal constant SYNCER_BOND = 50e18;
    uint32 internal constant CHALLENGE_SECONDS = 20;
    uint256 internal constant ELECTION_WINDOW = 256; // ELECTION_WINDOW_BLOCKS
    /// @dev The initial fragments root `_post` commits (useRootFlow).
    bytes32 internal constant F0 = keccak256("initial fragments root");

    MockERC20 internal token;
    /// @dev The registry with its whole ABI (its own functions and those its modules serve).
    ITrainingRegistryFull internal reg;
    /// @dev The registry's evidence functions (served by its fallback).
    ITrainingRegistryEvidence internal ev;
    address internal sponsor = address(0x5905);
    address internal syncer = address(0x5c);
    address internal relayer = address(0x4e1a);
    uint256[] internal keys;
    address[] internal trainers;

    function _deploy() internal {
        vm.warp(1_700_000_000);
        token = new MockERC20();
        // no minimum syncer fee here, so fixtures may post pools of 0; the attack tests
        // deploy registries with one (ProtocolV2Attacks.t.sol)
        reg = deployRegistry(token, MIN_SYNCER_STAKE, SYNCER_TIMEOUT, 0);
        ev = ITrainingRegistryEvidence(address(reg));
        for (uint256 i = 0; i < 16; ++i) {
            uint256 key = 0xA11CE + i;
            keys.push(key);
            trainers.push(vm.addr(key));
        }
    }

    function _fund(address who, uint256 amount) internal {
        token.mint(who, amount);
        vm.prank(who);
        token.approve(address(reg), type(uint256).max);
    }

    function _registerSyncer(address who, uint256 amount) internal {
        _fund(who, amount);
        vm.prank(who);
        reg.registerSyncer(amount);
        vm.roll(block.number + 1); // stake counts in elections requested from the next block on
    }

    /// @dev Takes `who` out of the syncer pool: its exit (SyncerLeaving), then, once the election
    /// window of that change has passed, its stake (each step waits out the previous change's window).
    function _leavePool(address who) internal {
        vm.roll(block.number + ELECTION_WINDOW + 1);
        vm.prank(who);
        reg.unregisterSyncer();
        vm.roll(block.number + ELECTION_WINDOW + 1);
        vm.prank(who);
        reg.unregisterSyncer();
    }

    function _params(bytes32 id, uint16 m, uint16 k, uint16 f, uint32 rounds, uint256 pool)
        internal
        pure
        returns (ITrainingRegistryTypes.TaskParams memory p)
    {
        p.taskId = id;
        p.specHash = keccak256(abi.encode("spec", id));
        p.specCid = "bafkreispec";
        p.initialWeightsRoot = keccak256(abi.encode("w0", id));
        p.trainerCount = m;
        p.quorum = k;
        p.fragmentCount = f;
        p.innerSteps = 24;
        p.maxRounds = rounds;
        p.graceWindowMs = GRACE_MS;
        p.aggregation = 1;
        p.tier = 0;
        p.minStake = MIN_STAKE;
        p.rewardPool = pool;
        p.fragmentSizes = new uint64[](f);
        for (uint256 i = 0; i < f; ++i) {
            p.fragmentSizes[i] = uint64(1000 * (i + 1));
        }
        p.enrollmentSeconds = ENROLL_SECONDS;
        p.syncerFeeBps = 0;
        p.syncerBond = SYNCER_BOND;
        p.normScreenSq = 0x42C80000; // 100.0: a norm screen of x10
        p.challengeSeconds = CHALLENGE_SECONDS;
    }

    /// @dev Posts `p` and, as its sponsor, commits the initial fragments root F0 and the outer
    /// rule `_outer()` (useRootFlow), so trainers may enroll.
    function _post(ITrainingRegistryTypes.TaskParams memory p) internal {
        _postOnly(p);
        vm.prank(sponsor);
        reg.useRootFlow(p.taskId, F0, _outer());
    }

    /// @dev Posts `p` only (enrollment is refused until the sponsor's useRootFlow).
    function _postOnly(ITrainingRegistryTypes.TaskParams memory p) internal {
        _fund(sponsor, p.rewardPool);
        vm.prank(sponsor);
        reg.postTask(p);
    }

    /// @dev lr 0.7, momentum 0.9, Nesterov, no trim.
    function _outer() internal pure returns (ITrainingRegistryRounds.OuterRule memory) {
        return ITrainingRegistryRounds.OuterRule({lr: 0x3F333333, mu: 0x3F666666, nesterov: true, alphaBps: 0});
    }

    function _enroll(bytes32 id, uint256 i, uint256 stake) internal {
        _fund(trainers[i], stake);
        vm.prank(trainers[i]);
        reg.enrollTrainer(id, stake, "did:tenzro:trainer");
    }

    /// @dev Trainer i's signed submission of (round, frag) over the commitment (root, sumsq),
    /// started from the open round's weights root.
    function _signed(uint256 i, bytes32 id, uint32 round, uint16 frag, bytes32 root, uint32 sumsq)
        internal
        view
        returns (ITrainingRegistryTypes.SignedPayload memory)
    {
        return _signedOn(i, id, round, frag, root, sumsq, reg.getRun(id).weightsRoot);
    }

    function _signedOn(uint256 i, bytes32 id, uint32 round, uint16 frag, bytes32 root, uint32 sumsq, bytes32 base)
        internal
        view
        returns (ITrainingRegistryTypes.SignedPayload memory sp)
    {
        sp.payloadRoot = root;
        sp.payloadSumsq = sumsq;
        sp.cid = "bafkreigradient";
        sp.payloadHash = keccak256(abi.encode(id, i, round, frag));
        (uint8 v, bytes32 r, bytes32 s) = vm.sign(keys[i], reg.outerGradientDigest(id, round, frag, base, sp));
        sp.signature = abi.encodePacked(r, s, v);
    }

    /// @dev Trainer i commits to its forced submission `sp` of the open round's fragment `frag`
    /// (commitSubmission; the commit phase must be open). Reveal it after the phase with `_reveal`.
    function _commitForced(bytes32 id, uint256 i, uint16 frag, ITrainingRegistryTypes.SignedPayload memory sp)
        internal
    {
        ITrainingRegistryTypes.RunView memory v = reg.getRun(id);
        bytes32 sh = RoundProofs.structHash(
            id, v.currentRound, frag, v.weightsRoot, sp.payloadRoot, sp.payloadSumsq, sp.cid, sp.payloadHash
        );
        vm.prank(trainers[i]);
        reg.commitSubmission(id, v.currentRound, frag, keccak256(abi.encode(sh, trainers[i])));
    }

    /// @dev A relayer reveals the committed forced submission `sp` (submitOuterGradient; after the
    /// commit phase: `_toRevealPhase`).
    function _reveal(bytes32 id, uint32 round, uint16 frag, ITrainingRegistryTypes.SignedPayload memory sp) internal {
        vm.prank(relayer);
        reg.submitOuterGradient(id, round, frag, sp);
    }

    /// @dev Trainer i forces `sp` of the open round's fragment `frag` whole: commits it, waits out
    /// the commit phase and reveals it (one trainer only: the phase is over after it).
    function _force(bytes32 id, uint256 i, uint16 frag, ITrainingRegistryTypes.SignedPayload memory sp) internal {
        _commitForced(id, i, frag, sp);
        _toRevealPhase(id);
        _reveal(id, reg.getRun(id).currentRound, frag, sp);
    }

    /// @dev Warps past the open round's commit phase (a round commits early only after it).
    function _toRevealPhase(bytes32 id) internal {
        (uint64 closes,) = reg.commitPhase(id);
        if (block.timestamp <= closes) vm.warp(closes + 1);
    }

    /// @dev n copies of v.
    function _fill(uint256 n, uint256 v) internal pure returns (uint256[] memory a) {
        a = new uint256[](n);
        for (uint256 i = 0; i < n; ++i) {
            a[i] = v;
        }
    }

    /// @dev A commit of `round` over f fragments with these accepted bitmaps and previous credits.
    function _rootCommit(bytes32 id, uint32 round, uint256 f, uint256[] memory bitmaps, uint256[] memory previous)
        internal
        pure
        returns (ITrainingRegistryRounds.RootCommit memory c)
    {
        c.taskId = id;
        c.round = round;
        c.fragmentsRoot = keccak256(abi.encode("fragments", id, round));
        c.acceptedBitmaps = bitmaps;
        c.previousCredits = previous;
        c.fragmentHashes = new bytes32[](f);
        for (uint256 j = 0; j < f; ++j) {
            c.fragmentHashes[j] = keccak256(abi.encode(id, round, j));
        }
        c.transcriptHash = keccak256(abi.encode("transcript", id, round));
        c.transcriptCid = "bafkreitranscript";
    }

    /// @dev Commits `c` as the run's elected syncer once the round's commit phase is over.
    function _commitAs(ITrainingRegistryRounds.RootCommit memory c) internal {
        _toRevealPhase(c.taskId);
        vm.prank(reg.getRun(c.taskId).syncer);
        reg.commitRound(c);
    }

    /// @dev The cumulative credits of every enrolled trainer after the rounds `_fullRound` committed.
    mapping(bytes32 id => uint256[]) internal _credits;

    /// @dev The credits each of the run's n enrolled trainers holds so far (as `_fullRound` counted).
    function _creditsNow(bytes32 id) internal view returns (uint256[] memory c) {
        uint256 n = reg.getRun(id).enrolledCount;
        c = new uint256[](n);
        uint256[] storage kept = _credits[id];
        for (uint256 i = 0; i < kept.length && i < n; ++i) {
            c[i] = kept[i];
        }
    }

    /// @dev Round `round` of run `id` committed (after its commit phase) with trainers [0, m)
    /// accepted on every one of its f fragments and the others on none.
    function _fullRound(bytes32 id, uint32 round, uint16 m, uint16 f) internal {
        uint256[] memory previous = _creditsNow(id);
        uint256[] memory bits = new uint256[](previous.length);
        uint64[] memory sizes = reg.getRun(id).fragmentSizes;
        uint256 gain = 0;
        for (uint256 j = 0; j < f; ++j) {
            gain += sizes[j];
        }
        for (uint256 i = 0; i < m; ++i) {
            bits[i] = (uint256(1) << f) - 1;
        }
        _commitAs(_rootCommit(id, round, f, bits, previous));
        delete _credits[id];
        for (uint256 i = 0; i < previous.length; ++i) {
            _credits[id].push(previous[i] + (i < m ? gain : 0));
        }
    }

    /// @dev The credits root of these cumulative credits (leaf i: trainer index i).
    function _creditsRoot(uint256[] memory credits) internal pure returns (bytes32 root) {
        (root,) = CreditsTree.rootAndPath(CreditsTree.leaves(credits), 0);
    }

    /// @dev The Merkle path of trainer index `at` in the credits tree of `credits`.
    function _proof(uint256[] memory credits, uint16 at) internal pure returns (bytes32[] memory path) {
        (, path) = CreditsTree.rootAndPath(CreditsTree.leaves(credits), at);
    }

    /// @dev Seals run `id` once its last round's challenge window is over and claims every
    /// enrolled trainer's reward against the credits `_fullRound` counted.
    function _sealAndClaim(bytes32 id) internal {
        vm.warp(block.timestamp + reg.getRun(id).challengeSeconds + 1);
        reg.sealRootRun(id);
        uint256[] memory credits = _creditsNow(id);
        for (uint256 i = 0; i < credits.length; ++i) {
            // forge-lint: disable-next-line(unsafe-typecast) -- i < enrolledCount, a uint16
            reg.claim(id, uint16(i), credits[i], _proof(credits, uint16(i)));
        }
    }

    /// @dev Both steps of an election: request in this block, resolve in the next.
    function _elect(bytes32 id) internal returns (address) {
        reg.requestSyncerElection(id);
        vm.roll(block.number + 1);
        return reg.electSyncer(id);
    }

    /// @dev Posts, enrolls m trainers (opens round 0), elects a syncer.
    function _startRun(bytes32 id, uint16 m, uint16 k, uint16 f, uint32 rounds, uint256 pool) internal {
        _post(_params(id, m, k, f, rounds, pool));
        for (uint256 i = 0; i < m; ++i) {
            _enroll(id, i, MIN_STAKE);
        }
        _elect(id);
    }
}
