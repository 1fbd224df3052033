// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {TestBase, Vm} from "./lib/Cheats.sol";
import {TrainingRegistry} from "../../contracts/TrainingRegistry.sol";
import {ITrainingRegistry} from "../../contracts/interfaces/ITrainingRegistry.sol";
import {MockERC20} from "../../contracts/mocks/MockERC20.sol";

/// @notice Drives random sequences of registry calls (post, elect, enroll, submit, report,
/// finalize, warp, seal, cancel, withdraw) and keeps ghost books the invariants compare with.
contract RegistryHandler is TestBase {
    uint256 internal constant MIN_STAKE = 10e18;
    uint256 internal constant N_TRAINERS = 5;

    MockERC20 public token;
    TrainingRegistry public reg;
    address public syncer = address(0x5c);
    address public sponsor = address(0x5905);
    uint256[] internal keys;
    address[] public trainers;
    bytes32[] public tasks;

    uint256 public deposited; // everything ever transferred into the registry
    uint256 public withdrawn; // everything ever withdrawn
    mapping(address account => uint256) public withdrawnBy;
    bool public nonSyncerFinalized; // set if a finalize by someone other than the syncer succeeded
    bool public evictedSubmitted; // set if an evicted trainer's submission succeeded
    bool public sealedTwice; // set if a second seal of a run succeeded
    uint256 public seals; // successful seals (progress check: runs do reach the seal)
    uint256 public finalizes; // successful finalizeRound calls

    constructor() {
        token = new MockERC20();
        reg = new TrainingRegistry(token, 100e18, 60);
        for (uint256 i = 0; i < N_TRAINERS; ++i) {
            keys.push(0xB0B + i);
            trainers.push(vm.addr(0xB0B + i));
            _approve(trainers[i]);
        }
        _approve(syncer);
        _approve(sponsor);
        token.mint(syncer, 100e18);
        vm.prank(syncer);
        reg.registerSyncer(100e18);
        deposited += 100e18;
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
        ITrainingRegistry.TaskParams memory p;
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
        p.maxMisses = uint8((shape / 108) % 2);
        p.minStake = MIN_STAKE;
        p.rewardPool = pool;
        p.fragmentSizes = new uint64[](p.fragmentCount);
        for (uint256 j = 0; j < p.fragmentCount; ++j) {
            p.fragmentSizes[j] = uint64(100 + 37 * j);
        }
        token.mint(sponsor, pool);
        vm.prank(sponsor);
        reg.postTask(p);
        tasks.push(id);
        deposited += pool;
        if (shape % 5 != 0) reg.electSyncer(id); // most runs get their syncer at once

    }

    function electSyncer(uint256 seed) external {
        if (tasks.length == 0) return;
        try reg.electSyncer(_task(seed)) {} catch {}
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

    function submit(uint256 seed, uint256 who, uint16 fragment) external {
        if (tasks.length == 0) return;
        bytes32 id = _task(seed);
        ITrainingRegistry.RunView memory v = reg.getRun(id);
        uint256 i = who % N_TRAINERS;
        bool evicted = reg.trainerMetrics(id, trainers[i]).evicted;
        uint16 f = uint16(fragment % (v.fragmentCount + 1)); // sometimes out of range
        bytes32 h = keccak256(abi.encode(id, i, v.currentRound, f));
        (uint8 sv, bytes32 r, bytes32 s) = vm.sign(keys[i], reg.outerGradientDigest(id, v.currentRound, f, "c", h));
        try reg.submitOuterGradient(id, v.currentRound, f, "c", h, abi.encodePacked(r, s, sv)) {
            if (evicted) evictedSubmitted = true;
        } catch {}
    }

    function reportInvalid(uint256 seed, uint256 who, uint16 fragment, uint8 reason) external {
        if (tasks.length == 0) return;
        bytes32 id = _task(seed);
        ITrainingRegistry.RunView memory v = reg.getRun(id);
        vm.prank(syncer);
        try reg.reportInvalid(id, v.currentRound, fragment % 4, trainers[who % N_TRAINERS], 1 + reason % 4) {} catch {}
    }

    /// @dev Accepts a random subset of what was submitted; sometimes from a non-syncer.
    function finalize(uint256 seed, uint256 mask, bool asStranger) external {
        if (tasks.length == 0) return;
        bytes32 id = _task(seed);
        ITrainingRegistry.RunView memory v = reg.getRun(id);
        if (v.status != ITrainingRegistry.RunStatus.Training) return;
        address[] memory list = reg.trainersOf(id);
        ITrainingRegistry.RoundCommit memory c;
        c.taskId = id;
        c.round = v.currentRound;
        c.fragmentHashes = new bytes32[](v.fragmentCount);
        c.fragmentCids = new string[](v.fragmentCount);
        c.acceptedBitmaps = new uint256[](list.length);
        for (uint256 i = 0; i < list.length; ++i) {
            (uint256 sub, uint256 rej,) = reg.submissionsOf(id, v.currentRound, list[i]);
            c.acceptedBitmaps[i] = sub & ~rej & (mask >> (8 * i));
        }
        address caller = asStranger ? address(0xBAD) : v.syncer;
        vm.prank(caller);
        try reg.finalizeRound(c) {
            if (caller != v.syncer) nonSyncerFinalized = true;
            ++finalizes;
        } catch {}
    }

    function warp(uint16 secs) external {
        vm.warp(block.timestamp + secs % 200);
    }

    function seal(uint256 seed) external {
        if (tasks.length == 0) return;
        bytes32 id = _task(seed);
        bool wasSealed = reg.getRun(id).status == ITrainingRegistry.RunStatus.Sealed;
        try reg.seal(id) {
            if (wasSealed) sealedTwice = true;
            ++seals;
        } catch {}
    }

    function cancel(uint256 seed) external {
        if (tasks.length == 0) return;
        vm.prank(sponsor);
        try reg.cancelTask(_task(seed)) {} catch {}
    }

    function withdraw(uint256 who) external {
        address a = who % 3 == 0 ? sponsor : trainers[who % N_TRAINERS];
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
    TrainingRegistry internal reg;

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
        a = new address[](n + 2);
        for (uint256 i = 0; i < n; ++i) {
            a[i] = h.trainers(i);
        }
        a[n] = h.sponsor();
        a[n + 1] = h.syncer();
    }

    /// @notice Tokens are conserved: the registry's balance = reward pools left + stakes held
    /// + syncer stakes + credited-but-unwithdrawn = deposited - withdrawn.
    function invariant_tokensConserved() public view {
        uint256 held;
        for (uint256 i = 0; i < h.tasksLength(); ++i) {
            ITrainingRegistry.RunView memory v = reg.getRun(h.tasks(i));
            held += v.rewardPoolLeft + v.stakeHeld;
        }
        (uint256 syncerStake,,) = reg.syncerInfo(h.syncer());
        held += syncerStake;
        address[] memory a = _accounts();
        for (uint256 i = 0; i < a.length; ++i) {
            held += reg.withdrawable(a[i]);
        }
        uint256 bal = h.token().balanceOf(address(reg));
        assertEq(bal, held, "balance = pools + stakes + syncer stakes + withdrawable");
        assertEq(bal, h.deposited() - h.withdrawn(), "balance = deposited - withdrawn");
    }

    /// @notice Nothing is credited twice: a run's credits are the sum of its trainers' credits,
    /// and each trainer's accepted count never exceeds finalized rounds x F.
    function invariant_nothingCreditedTwice() public view {
        for (uint256 i = 0; i < h.tasksLength(); ++i) {
            bytes32 id = h.tasks(i);
            ITrainingRegistry.RunView memory v = reg.getRun(id);
            address[] memory list = reg.trainersOf(id);
            uint256 sum;
            uint256 finalized = v.status == ITrainingRegistry.RunStatus.Enrolling
                || v.status == ITrainingRegistry.RunStatus.Cancelled ? 0 : v.currentRound;
            for (uint256 j = 0; j < list.length; ++j) {
                ITrainingRegistry.TrainerMetrics memory m = reg.trainerMetrics(id, list[j]);
                sum += m.credits;
                assertTrue(m.accepted <= finalized * v.fragmentCount, "accepted <= rounds x F");
            }
            assertEq(sum, v.totalCredits, "sum of credits");
        }
        assertTrue(!h.sealedTwice(), "sealed twice");
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
                ITrainingRegistry.RunStatus s = reg.getRun(id).status;
                if (s != ITrainingRegistry.RunStatus.Sealed && s != ITrainingRegistry.RunStatus.Cancelled) continue;
                ITrainingRegistry.TrainerMetrics memory m = reg.trainerMetrics(id, t);
                if (!m.enrolled) continue;
                owed += m.currentReward + m.stake - m.slashed;
            }
            assertEq(reg.withdrawable(t) + h.withdrawnBy(t), owed, "credited = payouts of settled runs");
        }
    }

    /// @notice Only the syncer finalizes.
    function invariant_onlySyncerFinalizes() public view {
        assertTrue(!h.nonSyncerFinalized(), "a non-syncer finalized");
    }

    /// @notice An evicted trainer cannot submit.
    function invariant_evictedCannotSubmit() public view {
        assertTrue(!h.evictedSubmitted(), "an evicted trainer submitted");
    }
}
