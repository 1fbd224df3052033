// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {ITrainingRegistryTypes} from "../../contracts/interfaces/ITrainingRegistryTypes.sol";
import {RegistryBase} from "./RegistryBase.sol";
import {ITrainingRegistry} from "../../contracts/interfaces/ITrainingRegistry.sol";
import {RunRoot} from "../../contracts/lib/RunRoot.sol";

/// @notice Unit and fuzz tests of TrainingRegistry: the lifecycle, payouts, slashing,
/// syncer replacement and the access rules.
contract TrainingRegistryTest is RegistryBase {
    bytes32 internal constant ID = keccak256("task-1");

    function setUp() public {
        _deploy();
        _registerSyncer(syncer, MIN_SYNCER_STAKE);
    }

    function _total() internal view returns (uint256) {
        return token.balanceOf(address(reg));
    }

    function test_fullRun_sealsReceiptThatVerifies() public {
        _startRun(ID, 3, 2, 2, 2, 1_000e18);
        _fullRound(ID, 0, 3, 2);
        _fullRound(ID, 1, 3, 2);
        ITrainingRegistryTypes.RunView memory v = reg.getRun(ID);
        assertTrue(v.status == ITrainingRegistryTypes.RunStatus.Completed, "completed");
        _sealAndClaim(ID);
        (ITrainingRegistryTypes.TrainingReceipt memory r, bytes memory ser) = reg.getReceipt(ID);
        assertEq(RunRoot.runRoot(ser), r.runRoot, "run root of serialized receipt");
        assertEq(ser.length, 189 + 32 * 2, "receipt length");
        assertEq(r.rounds, 2, "rounds");
        assertEq(r.trainerCount, 3, "trainers");
        assertEq(r.registry, address(reg), "registry");
        // final model hash = weights root of the last round's fragment hashes
        bytes32[] memory h = new bytes32[](2);
        h[0] = keccak256(abi.encode(ID, uint32(1), uint256(0)));
        h[1] = keccak256(abi.encode(ID, uint32(1), uint256(1)));
        assertEq(r.finalModelHash, RunRoot.weightsRoot(h), "final model hash");
        // equal credits: each trainer gets a third of the pool, dust to the sponsor
        uint256 each = uint256(1_000e18) / 3;
        for (uint256 i = 0; i < 3; ++i) {
            assertEq(reg.withdrawable(trainers[i]), each + MIN_STAKE, "payout");
            vm.prank(trainers[i]);
            reg.withdraw();
            assertEq(token.balanceOf(trainers[i]), each + MIN_STAKE, "paid");
        }
        vm.warp(block.timestamp + 91 days); // the claim period is over: the dust goes back
        reg.sweep(ID);
        assertEq(reg.withdrawable(sponsor), 1_000e18 - 3 * each, "dust");
        vm.prank(sponsor);
        reg.withdraw();
        assertEq(_total(), MIN_SYNCER_STAKE, "only the syncer stake is left");
        (, uint32 active,, uint256 locked) = reg.syncerInfo(syncer);
        assertEq(active, 0, "syncer released at the seal");
        assertEq(locked, 0, "bond unlocked at the seal");
    }

    function test_creditsWeightedByFragmentSize() public {
        _startRun(ID, 2, 1, 2, 1, 900e18);
        // trainer 0 accepted on fragment 0 (size 1000), trainer 1 on fragment 1 (size 2000)
        uint256[] memory acc = new uint256[](2);
        acc[0] = 1;
        acc[1] = 2;
        _commitAs(_rootCommit(ID, 0, 2, acc, _fill(2, 0)));
        vm.warp(block.timestamp + CHALLENGE_SECONDS + 1);
        reg.sealRootRun(ID);
        uint256[] memory credits = new uint256[](2);
        credits[0] = 1000;
        credits[1] = 2000;
        reg.claim(ID, 0, 1000, _proof(credits, 0));
        reg.claim(ID, 1, 2000, _proof(credits, 1));
        assertEq(reg.withdrawable(trainers[0]), 300e18 + MIN_STAKE, "a third");
        assertEq(reg.withdrawable(trainers[1]), 600e18 + MIN_STAKE, "two thirds");
        vm.warp(block.timestamp + 91 days); // the claim period is over: the sweep finds nothing left
        reg.sweep(ID);
        assertEq(reg.withdrawable(sponsor), 0, "no dust");
    }

    function test_syncerReplacement_afterTimeout() public {
        address other = address(0x5d);
        _registerSyncer(other, MIN_SYNCER_STAKE);
        _startRun(ID, 1, 1, 1, 1, 1e18);
        address first = reg.getRun(ID).syncer;
        uint64 replaceableAt = reg.getRun(ID).syncerReplaceableAt;
        vm.expectRevert(
            abi.encodeWithSelector(ITrainingRegistryTypes.Registry__SyncerStillActive.selector, ID, first, replaceableAt)
        );
        reg.requestSyncerElection(ID);
        vm.warp(block.timestamp + 30 + SYNCER_TIMEOUT + 1);
        address second = _elect(ID);
        assertTrue(second != first, "replaced by the other candidate");
        (uint256 stake, uint32 active,, uint256 locked) = reg.syncerInfo(first);
        assertEq(stake, MIN_SYNCER_STAKE - SYNCER_BOND, "old syncer loses its bond for the run");
        assertEq(active, 0, "old syncer released");
        assertEq(locked, 0, "old syncer's bond no longer locked");
        assertEq(reg.burned(), SYNCER_BOND, "bond burned");
        assertEq(reg.getRun(ID).rewardPoolLeft, 1e18, "a slash never feeds the pool");
        _commitAs(_rootCommit(ID, 0, 1, _fill(1, 0), _fill(1, 0))); // the new syncer commits
        assertEq(reg.getRun(ID).syncer, second, "the replacement commits the round");
        _leavePool(first);
    }

    function test_syncerFee_accruesPerRound_claimableAfterSeal() public {
        ITrainingRegistryTypes.TaskParams memory p = _params(ID, 2, 1, 1, 2, 1_000e18);
        p.syncerFeeBps = 1_000; // 10 % of the pool over 2 rounds: 50e18 a round
        _post(p);
        _enroll(ID, 0, MIN_STAKE);
        _enroll(ID, 1, MIN_STAKE);
        _elect(ID);
        _fullRound(ID, 0, 2, 1);
        assertEq(reg.syncerFeeOf(ID, syncer), 50e18, "one round's fee");
        assertEq(reg.getRun(ID).rewardPoolLeft, 950e18, "taken from the pool");
        vm.prank(syncer);
        vm.expectRevert(
            abi.encodeWithSelector(ITrainingRegistryTypes.Registry__WrongStatus.selector, ID, ITrainingRegistryTypes.RunStatus.Training)
        );
        reg.claimSyncerFee(ID);
        _fullRound(ID, 1, 2, 1);
        _sealAndClaim(ID);
        vm.prank(syncer);
        assertEq(reg.claimSyncerFee(ID), 100e18, "claimed");
        assertEq(reg.withdrawable(syncer), 100e18, "withdrawable");
        assertEq(reg.withdrawable(trainers[0]), 450e18 + MIN_STAKE, "trainers share the rest");
        vm.prank(syncer);
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__NoSyncerFee.selector, ID, syncer));
        reg.claimSyncerFee(ID);
    }

    function test_enrollmentDeadline_closeByAnyone_orCancelByAnyone() public {
        bytes32 other = keccak256("task-2");
        _post(_params(ID, 3, 2, 1, 1, 5e18));
        _post(_params(other, 3, 2, 1, 1, 5e18));
        _enroll(ID, 0, MIN_STAKE);
        _enroll(ID, 1, MIN_STAKE);
        _enroll(other, 0, MIN_STAKE);
        uint64 deadline = reg.getRun(ID).enrollmentDeadline;
        assertEq(deadline, block.timestamp + ENROLL_SECONDS, "deadline");
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__EnrollmentStillOpen.selector, ID, deadline));
        reg.closeEnrollment(ID);
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__NotSponsor.selector, other, address(this)));
        ev.cancelTask(other);
        vm.warp(uint256(deadline) + 1);
        _fund(trainers[2], MIN_STAKE);
        vm.prank(trainers[2]);
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__EnrollmentClosed.selector, ID, deadline));
        reg.enrollTrainer(ID, MIN_STAKE, "did:tenzro:late");
        // K = 2 enrolled: the run can train, nobody but the sponsor cancels it; anyone opens round 0
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__RunCanTrain.selector, ID, uint16(2), uint16(2)));
        ev.cancelTask(ID);
        reg.closeEnrollment(ID);
        assertTrue(reg.getRun(ID).status == ITrainingRegistryTypes.RunStatus.Training, "round 0 open");
        // 1 of K = 2 enrolled: anyone cancels, everything is refunded
        ev.cancelTask(other);
        assertEq(reg.withdrawable(trainers[0]), MIN_STAKE, "stake back");
        assertEq(reg.withdrawable(sponsor), 5e18, "pool back");
    }

    function test_cancelRefundsEverything() public {
        _post(_params(ID, 3, 2, 1, 1, 5e18));
        _enroll(ID, 0, MIN_STAKE);
        vm.prank(sponsor);
        ev.cancelTask(ID);
        assertEq(reg.withdrawable(sponsor), 5e18, "pool back");
        assertEq(reg.withdrawable(trainers[0]), MIN_STAKE, "stake back");
    }

    /// @notice Fuzzed amounts: whatever the pool, stakes and accepted pattern, the seal, the
    /// claims and the sweep pay out exactly what was escrowed and staked.
    function testFuzz_sealConservesTokens(uint96 pool, uint96 extraStake, uint8 pattern) public {
        ITrainingRegistryTypes.TaskParams memory p = _params(ID, 3, 1, 2, 2, pool);
        p.syncerFeeBps = uint16(pattern) * 7; // 0 .. 1785 bps
        _post(p);
        for (uint256 i = 0; i < 3; ++i) {
            _enroll(ID, i, MIN_STAKE + uint256(extraStake) * (i + 1));
        }
        _elect(ID);
        uint256[] memory credits = new uint256[](3);
        for (uint32 r = 0; r < 2; ++r) {
            uint256[] memory acc = new uint256[](3);
            for (uint256 i = 0; i < 3; ++i) {
                acc[i] = (uint256(pattern) >> (2 * i + r)) & 3;
            }
            vm.warp(block.timestamp + 31); // after the deadline: any accepted set, quorum or not
            _commitAs(_rootCommit(ID, r, 2, acc, credits));
            for (uint256 i = 0; i < 3; ++i) {
                credits[i] += (acc[i] & 1) * 1000 + (acc[i] >> 1) * 2000;
            }
        }
        vm.warp(block.timestamp + CHALLENGE_SECONDS + 1);
        reg.sealRootRun(ID);
        // when nobody was credited the seal gave the whole pool back: there is nothing to claim
        // or sweep; otherwise every trainer claims and the sweep returns the rest
        if (credits[0] + credits[1] + credits[2] != 0) {
            for (uint256 i = 0; i < 3; ++i) {
                // forge-lint: disable-next-line(unsafe-typecast) -- i < 3
                reg.claim(ID, uint16(i), credits[i], _proof(credits, uint16(i)));
            }
            vm.warp(block.timestamp + 91 days);
            reg.sweep(ID);
        }
        uint256 out;
        for (uint256 i = 0; i < 3; ++i) {
            out += reg.withdrawable(trainers[i]);
            vm.prank(trainers[i]);
            reg.withdraw();
        }
        out += reg.withdrawable(sponsor);
        uint256 fees = reg.syncerFeeOf(ID, syncer);
        if (fees != 0) {
            vm.prank(syncer);
            reg.claimSyncerFee(ID);
        }
        uint256 staked = 3 * MIN_STAKE + 6 * uint256(extraStake);
        assertEq(out + fees + reg.burned(), uint256(pool) + staked, "payouts + fees + burned = pool + stakes");
        assertEq(
            _total(), MIN_SYNCER_STAKE + reg.withdrawable(sponsor) + fees + reg.burned(), "registry keeps the rest"
        );
    }

    function testFuzz_postTaskEscrowsExactly(uint128 pool) public {
        _post(_params(ID, 2, 1, 1, 1, pool));
        assertEq(_total(), MIN_SYNCER_STAKE + pool, "escrowed");
        assertEq(reg.getRun(ID).rewardPoolLeft, pool, "pool");
    }

    function testFuzz_badSignatureNeverCounts(bytes32 junk) public {
        _startRun(ID, 1, 1, 1, 1, 1e18);
        bytes memory sig = abi.encodePacked(junk, junk, uint8(27));
        vm.expectRevert();
        ITrainingRegistryTypes.SignedPayload memory sp;
        sp.cid = "bafk";
        sp.signature = sig;
        reg.submitOuterGradient(ID, 0, 0, sp);
        (uint256 sub,) = reg.submissionsOf(ID, 0, trainers[0]);
        assertEq(sub, 0, "nothing recorded");
    }
}
