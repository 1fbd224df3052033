// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {ITrainingRegistryFull} from "../../contracts/interfaces/ITrainingRegistryFull.sol";
import {ITrainingRegistryTypes} from "../../contracts/interfaces/ITrainingRegistryTypes.sol";
import {ITrainingRegistryRounds} from "../../contracts/interfaces/ITrainingRegistryRounds.sol";
import {RegistryBase} from "./RegistryBase.sol";
import {deployRegistry} from "./lib/DeployRegistry.sol";
import {ITrainingRegistry} from "../../contracts/interfaces/ITrainingRegistry.sol";
import {ITrainingRegistryEvidence} from "../../contracts/interfaces/ITrainingRegistryEvidence.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {ReceiptVerifier} from "../../contracts/ReceiptVerifier.sol";
import {RewardEscrow} from "../../contracts/RewardEscrow.sol";

/// @dev Attack 8: tries to become syncer inside one transaction, reverting unless it wins.
contract ElectionGrinder {
    ITrainingRegistryFull internal immutable reg;

    constructor(ITrainingRegistryFull reg_) {
        reg = reg_;
    }

    function register(IERC20 token, uint256 amount) external {
        token.approve(address(reg), amount);
        reg.registerSyncer(amount);
    }

    function grind(bytes32 taskId) external {
        reg.requestSyncerElection(taskId);
        require(reg.electSyncer(taskId) == address(this), "lost");
    }
}

/// @notice The attacks of the "Protocol v2" issue (contracts/THREATS.md), each as the attacker
/// would run it against the landed contracts, now failing. Attacks 4 and 5 (a lying syncer, a
/// sponsor-syncer collusion slashing on its word) are in Evidence.t.sol and, for the root flow's
/// fraud proofs, tests/contracts/test_root_flow_proofs.py; attack 6 (copying) is in
/// RootFlow.t.sol (commit-reveal of the root flow's forced path).
contract ProtocolV2AttacksTest is RegistryBase {
    bytes32 internal constant ID = keccak256("victim-task");
    address internal attacker = address(0xA77AC);

    function setUp() public {
        _deploy();
        _registerSyncer(syncer, MIN_SYNCER_STAKE);
    }

    /// @dev Extends the fixture's trainer keys to n.
    function _trainers(uint256 n) internal {
        for (uint256 i = keys.length; i < n; ++i) {
            keys.push(0xA11CE + i);
            trainers.push(vm.addr(0xA11CE + i));
        }
    }

    // ------------------------------------------------------------ 1: syncer stake drain

    /// Before: a syncer elected after the round deadline was replaceable at once, and each
    /// electSyncer slashed 10 % of the current syncer's whole pool stake into the run, so one
    /// transaction of repeated calls drained ~88 % of four syncers' stakes.
    function test_attack1_syncerStakeDrain_fails() public {
        address[3] memory others = [address(0x5d), address(0x5e), address(0x5f)];
        for (uint256 i = 0; i < 3; ++i) {
            _registerSyncer(others[i], MIN_SYNCER_STAKE);
        }
        // the attacker's own run, pool 0, trainers enrolled
        _startRun(ID, 2, 1, 1, 1, 0);
        address first = reg.getRun(ID).syncer;
        vm.warp(block.timestamp + 30 + SYNCER_TIMEOUT + 1); // round late: `first` is replaceable
        uint256 poolBefore = reg.getRun(ID).rewardPoolLeft;
        address second = _elect(ID);
        // a newly elected syncer of a late run is not replaceable at once: its clock starts now
        uint64 replaceableAt = reg.getRun(ID).syncerReplaceableAt;
        assertEq(replaceableAt, block.timestamp + SYNCER_TIMEOUT, "clock starts at the election");
        vm.prank(attacker);
        vm.expectRevert(
            abi.encodeWithSelector(ITrainingRegistryTypes.Registry__SyncerStillActive.selector, ID, second, replaceableAt)
        );
        reg.requestSyncerElection(ID);
        // the one failure cost exactly the run's bond, burned: nothing went into the attacker's run
        (uint256 stakeFirst,,,) = reg.syncerInfo(first);
        assertEq(stakeFirst, MIN_SYNCER_STAKE - SYNCER_BOND, "first loses its bond once");
        assertEq(reg.getRun(ID).rewardPoolLeft, poolBefore, "the attacker's pool gains nothing");
        assertEq(reg.burned(), SYNCER_BOND, "burned");
        uint256 total;
        address[4] memory all = [syncer, others[0], others[1], others[2]];
        for (uint256 i = 0; i < 4; ++i) {
            (uint256 st,,,) = reg.syncerInfo(all[i]);
            total += st;
        }
        assertEq(total, 4 * MIN_SYNCER_STAKE - SYNCER_BOND, "four syncers lost one bond in all");
    }

    // ------------------------------------------------------------ 2: candidate-pool squatting

    /// Before: 63 registrations of 1 wei filled the 64 slots; no backup syncer could join and a
    /// run whose only syncer went silent was frozen for ever.
    function test_attack2_candidatePoolSquatting_fails() public {
        vm.prank(attacker);
        token.approve(address(reg), type(uint256).max);
        token.mint(attacker, 1);
        vm.prank(attacker);
        vm.expectRevert(
            abi.encodeWithSelector(ITrainingRegistryTypes.Registry__SyncerStakeTooLow.selector, 1, MIN_SYNCER_STAKE)
        );
        reg.registerSyncer(1);
        // squatting now costs minSyncerStake a slot, and a better-staked newcomer still gets in
        for (uint256 i = 1; i < 64; ++i) {
            _registerSyncer(address(uint160(0x10000 + i)), MIN_SYNCER_STAKE + i);
        }
        assertEq(reg.syncerCandidates().length, 64, "pool full");
        address honest = address(0x40E57);
        _fund(honest, MIN_SYNCER_STAKE + 1);
        vm.prank(honest);
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__SyncerPoolFull.selector, 64));
        reg.registerSyncer(MIN_SYNCER_STAKE); // not more than the smallest: refused
        // the smallest idle candidate (`syncer`, MIN_SYNCER_STAKE) starts to leave; the newcomer is in
        vm.expectEmit(true, false, false, true);
        emit ITrainingRegistryTypes.SyncerLeaving(syncer, block.number + ELECTION_WINDOW + 1);
        vm.prank(honest);
        reg.registerSyncer(MIN_SYNCER_STAKE + 1);
        (,, bool registered,) = reg.syncerInfo(honest);
        assertTrue(registered, "newcomer admitted");
        // the displaced candidate's stake comes back once its exit has taken effect, nothing more
        vm.prank(syncer);
        vm.expectRevert(); // its exit has not taken effect yet
        reg.unregisterSyncer();
        vm.roll(block.number + ELECTION_WINDOW + 1);
        vm.prank(syncer);
        reg.unregisterSyncer();
        assertEq(reg.syncerCandidates().length, 64, "64 again");
        uint256 back;
        for (uint256 i = 1; i < 64; ++i) {
            back += reg.withdrawable(address(uint160(0x10000 + i)));
        }
        back += reg.withdrawable(syncer);
        assertEq(back, MIN_SYNCER_STAKE, "exactly one candidate displaced, stake refunded");
    }

    /// A busy candidate (syncer of a live run) is never displaced, so a run cannot lose its
    /// syncer to a newcomer.
    function test_attack2_busyCandidateNeverDisplaced() public {
        _startRun(ID, 1, 1, 1, 1, 0); // `syncer` is busy with ID
        for (uint256 i = 1; i < 64; ++i) {
            _registerSyncer(address(uint160(0x10000 + i)), MIN_SYNCER_STAKE + 10);
        }
        _registerSyncer(address(0x40E57), MIN_SYNCER_STAKE + 11);
        (,, bool stillThere,) = reg.syncerInfo(syncer);
        assertTrue(stillThere, "the busy syncer keeps its slot although its stake is the smallest");
    }

    // ------------------------------------------------------------ 3: free stake lock

    /// Before: tasks that could never fill (pool 0, huge minimum stake, M = K = 256) plus
    /// electSyncer locked any syncer's stake for ever.
    function test_attack3_freeStakeLock_fails() public {
        ITrainingRegistryFull strict = deployRegistry(token, MIN_SYNCER_STAKE, SYNCER_TIMEOUT, 1e15);
        reg = strict;
        ev = ITrainingRegistryEvidence(address(strict));
        _registerSyncer(syncer, MIN_SYNCER_STAKE);
        // a run that pays its syncer nothing cannot be posted
        ITrainingRegistryTypes.TaskParams memory p = _params(ID, 256, 256, 1, 1, 0);
        p.minStake = type(uint128).max;
        _fund(attacker, 0);
        vm.prank(attacker);
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__SyncerFeeTooLow.selector, 0, 1e15));
        reg.postTask(p);
        // one that pays is posted, but no syncer is elected while it cannot train
        p.rewardPool = 1e18;
        p.syncerFeeBps = 100;
        _fund(attacker, p.rewardPool);
        vm.prank(attacker);
        reg.postTask(p);
        vm.expectRevert(
            abi.encodeWithSelector(
                ITrainingRegistryTypes.Registry__WrongStatus.selector, ID, ITrainingRegistryTypes.RunStatus.Enrolling
            )
        );
        reg.requestSyncerElection(ID);
        // after the enrollment deadline anyone ends it, and the syncer leaves freely
        vm.warp(block.timestamp + ENROLL_SECONDS + 1);
        ev.cancelTask(ID);
        _leavePool(syncer);
        assertEq(reg.withdrawable(syncer), MIN_SYNCER_STAKE, "stake never locked");
    }

    // ------------------------------------------------------------ 7: escrow hijack

    /// @dev A RewardEscrow on the verifier at 0x…1008 and a deposit of 1 TNZO paying for run ID
    /// of `sponsor` with `specHash` and at least one credit of accepted work.
    function _escrowFor(bytes32 specHash) internal returns (RewardEscrow escrow, uint256 id) {
        address precompile = 0x0000000000000000000000000000000000001008;
        vm.etch(precompile, address(new ReceiptVerifier()).code);
        escrow = new RewardEscrow(precompile);
        _fund(address(this), 1e18);
        token.approve(address(escrow), 1e18);
        id = escrow.deposit(
            token,
            address(0xBE4E),
            1e18,
            RewardEscrow.RunTerms({taskId: ID, registry: address(reg), sponsor: sponsor, specHash: specHash, minCredits: 1}),
            uint64(block.timestamp + 30 days)
        );
    }

    /// @dev Enrolls trainer 0 in the posted one-round run ID, elects, commits nothing accepted
    /// after the deadline and seals; returns the receipt and its run root.
    function _sealEmptyRun() internal returns (bytes memory receipt, bytes32 root) {
        _enroll(ID, 0, MIN_STAKE);
        _elect(ID);
        vm.warp(block.timestamp + 31);
        _commitAs(_rootCommit(ID, 0, 1, _fill(1, 0), _fill(1, 0)));
        vm.warp(block.timestamp + CHALLENGE_SECONDS + 1);
        reg.sealRootRun(ID);
        (, receipt) = reg.getReceipt(ID);
        root = reg.sealedRunRoot(ID);
    }

    /// Before: RewardEscrow was bound only to (registry, taskId); whoever posted that task id
    /// first could seal a junk run with nothing accepted and have the escrow released.
    function test_attack7_escrowHijack_fails() public {
        bytes32 realSpec = keccak256("the sponsor's spec");
        (RewardEscrow escrow, uint256 id) = _escrowFor(realSpec);
        // the attacker front-runs the task id (even copying the spec hash) and seals a junk run
        ITrainingRegistryTypes.TaskParams memory p = _params(ID, 1, 1, 1, 1, 0);
        p.specHash = realSpec;
        vm.prank(attacker);
        reg.postTask(p);
        vm.prank(attacker);
        reg.useRootFlow(ID, F0, _outer());
        (bytes memory receipt, bytes32 root) = _sealEmptyRun();
        assertTrue(!escrow.canRelease(id, receipt, root), "canRelease says no");
        vm.expectRevert(abi.encodeWithSelector(RewardEscrow.RewardEscrow__SponsorMismatch.selector, sponsor, attacker));
        escrow.release(id, receipt, root);
    }

    /// The real sponsor's own run with nothing accepted does not release an escrow that asks for work.
    function test_attack7_emptyRunOfTheRealSponsor_releasesNothing() public {
        ITrainingRegistryTypes.TaskParams memory p = _params(ID, 1, 1, 1, 1, 0);
        (RewardEscrow escrow, uint256 id) = _escrowFor(p.specHash);
        _post(p);
        (bytes memory receipt, bytes32 root) = _sealEmptyRun();
        vm.expectRevert(abi.encodeWithSelector(RewardEscrow.RewardEscrow__NotEnoughWork.selector, 1, 0));
        escrow.release(id, receipt, root);
    }

    // ------------------------------------------------------------ 8: election grinding

    /// Before: the draw was computable inside the transaction; a contract that reverted unless
    /// it won became syncer 5 of 5 times with 1 % of the stake.
    function test_attack8_electionGrinding_fails() public {
        ElectionGrinder grinder = new ElectionGrinder(reg);
        _fund(address(grinder), MIN_SYNCER_STAKE);
        grinder.register(token, MIN_SYNCER_STAKE);
        vm.roll(block.number + 1);
        _post(_params(ID, 1, 1, 1, 1, 0));
        _enroll(ID, 0, MIN_STAKE);
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__ElectionNotReady.selector, ID, block.number));
        grinder.grind(ID);
    }

    /// The outcome of a pending election is fixed by the request block's hash: who resolves it,
    /// when (within the window), and elections of other runs in between change nothing.
    function test_attack8_outcomeFixedAtRequest() public {
        for (uint256 i = 0; i < 6; ++i) {
            _registerSyncer(address(uint160(0x20000 + i)), MIN_SYNCER_STAKE);
        }
        bytes32 other = keccak256("other-task");
        _post(_params(ID, 1, 1, 1, 1, 0));
        _post(_params(other, 1, 1, 1, 1, 0));
        _enroll(ID, 0, MIN_STAKE);
        _enroll(other, 1, MIN_STAKE);
        reg.requestSyncerElection(ID);
        uint256 snap = vm.snapshotState();
        vm.roll(block.number + 1);
        address a = reg.electSyncer(ID);
        vm.revertToState(snap);
        vm.roll(block.number + 1);
        _elect(other); // another run's election in between
        vm.roll(block.number + 200);
        vm.prank(attacker);
        address b = reg.electSyncer(ID);
        assertEq(a, b, "same syncer whoever resolves, whenever");
        // past the window the request expires and must be made again
        bytes32 third = keccak256("third-task");
        _post(_params(third, 1, 1, 1, 1, 0));
        _enroll(third, 2, MIN_STAKE);
        reg.requestSyncerElection(third);
        uint256 at = block.number;
        vm.roll(block.number + 257);
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__ElectionExpired.selector, third, at));
        reg.electSyncer(third);
    }

    /// A candidate that sees the seed (the request block's hash) cannot then join or top up its
    /// stake to win the pending draw: stake added at or after the request block does not count.
    function test_attack8_stakeAfterSeedDoesNotCount() public {
        _post(_params(ID, 1, 1, 1, 1, 0));
        _enroll(ID, 0, MIN_STAKE);
        reg.requestSyncerElection(ID);
        vm.roll(block.number + 1);
        _registerSyncer(attacker, 1_000 * MIN_SYNCER_STAKE); // 99.9 % of the stake, after the seed
        assertEq(reg.electSyncer(ID), syncer, "the late stake is not in the draw");
    }

    // ------------------------------------------------------------ 9: gas bomb

    /// Before: the v1 flow's per-submission round close (since removed) at M = 256, F = 128 with
    /// everything accepted cost 33.4M gas, over a 30M block. Now M * F <= 2048, and the largest
    /// allowed shapes commit by root and seal in budget.
    function test_attack9_gasBomb_fails() public {
        vm.prank(attacker);
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__ShapeTooLarge.selector, 256, 128, 2048));
        reg.postTask(_params(ID, 256, 1, 128, 1, 0));
        _roundGas(keccak256("wide"), 256, 8);
        _roundGas(keccak256("deep"), 16, 128);
    }

    function _roundGas(bytes32 id, uint16 m, uint16 f) internal {
        _trainers(m);
        _post(_params(id, m, 1, f, 1, 0));
        for (uint256 i = 0; i < m; ++i) {
            _enroll(id, i, MIN_STAKE);
        }
        _elect(id);
        _toRevealPhase(id);
        ITrainingRegistryRounds.RootCommit memory c = _rootCommit(id, 0, f, _fill(m, (uint256(1) << f) - 1), _fill(m, 0));
        vm.prank(syncer);
        uint256 g = gasleft();
        reg.commitRound(c);
        uint256 commitGas = g - gasleft();
        vm.warp(block.timestamp + CHALLENGE_SECONDS + 1);
        g = gasleft();
        reg.sealRootRun(id);
        uint256 sealGas = g - gasleft();
        assertTrue(commitGas < 30_000_000, "the commit fits a block");
        assertTrue(sealGas < 30_000_000, "the seal fits a block");
    }

    /// The longest run (MAX_ROUNDS rounds) seals within a block.
    function test_attack9_longestRunSeals() public {
        _startRun(ID, 1, 1, 1, 1024, 0);
        for (uint32 r = 0; r < 1024; ++r) {
            vm.warp(block.timestamp + 31);
            _commitAs(_rootCommit(ID, r, 1, _fill(1, 0), _fill(1, 0)));
        }
        vm.warp(block.timestamp + CHALLENGE_SECONDS + 1);
        uint256 g = gasleft();
        reg.sealRootRun(ID);
        assertTrue(g - gasleft() < 30_000_000, "seal of 1024 rounds fits a block");
    }
}
