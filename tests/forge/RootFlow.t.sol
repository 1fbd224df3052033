// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {ITrainingRegistryTypes} from "../../contracts/interfaces/ITrainingRegistryTypes.sol";
import {ITrainingRegistryRounds} from "../../contracts/interfaces/ITrainingRegistryRounds.sol";
import {ITrainingRegistryFull} from "../../contracts/interfaces/ITrainingRegistryFull.sol";
import {RegistryBase} from "./RegistryBase.sol";
import {CreditsTree} from "./lib/CreditsTree.sol";
import {RoundProofs} from "../../contracts/lib/RoundProofs.sol";

/// @notice Rounds committed by root (contracts/PROTOCOL.md §5, build step 1): one commitRound per
/// round, the seal after the last round's challenge window, Merkle claims and the sweep; and
/// what a lying syncer, a copycat or a greedy claimant cannot do with them.
contract RootFlowTest is RegistryBase {
    ITrainingRegistryFull internal rf;
    bytes32 internal constant ID = keccak256("root-flow");
    uint256 internal constant POOL = 1_000e18;

    function setUp() public {
        _deploy();
        rf = ITrainingRegistryFull(address(reg));
        _registerSyncer(syncer, MIN_SYNCER_STAKE);
    }

    // ------------------------------------------------------------ helpers

    /// @dev Posts an M-trainer, K-quorum, F-fragment, R-round task in the root flow, enrolls M
    /// trainers and elects the syncer.
    function _startRoot(bytes32 id, uint16 m, uint16 k, uint16 f, uint32 rounds, uint256 pool) internal {
        _openRoot(id, m, k, f, rounds, pool);
        _toRevealPhase(id);
    }

    /// @dev As _startRoot, leaving round 0 in its commit phase.
    function _openRoot(bytes32 id, uint16 m, uint16 k, uint16 f, uint32 rounds, uint256 pool) internal {
        _post(_params(id, m, k, f, rounds, pool));
        for (uint256 i = 0; i < m; ++i) {
            _enroll(id, i, MIN_STAKE);
        }
        _elect(id);
    }

    /// @dev Commits as the syncer now (after vm.expectRevert: one call only).
    function _commitRaw(ITrainingRegistryRounds.RootCommit memory c) internal {
        vm.prank(syncer);
        rf.commitRound(c);
    }

    // ------------------------------------------------------------ the honest run

    /// @dev M = 4, K = 3, F = 3 (sizes 1000, 2000, 3000), R = 2. Round 0: everyone accepted on
    /// every fragment; round 1: trainer 3 did nothing. The registry sums the credits itself:
    /// 12000, 12000, 12000, 6000 (total 42000). Claims pay floor(pool' * c / 42000), the sweep
    /// returns the dust, stakes come back at the seal, and the registry ends holding only the
    /// syncer's stake.
    function test_honestRun_commitsClaimsAndSweep_conserveTokens() public {
        _startRoot(ID, 4, 3, 3, 2, POOL);
        _commitAs(_rootCommit(ID, 0, 3, _fill(4, 7), _fill(4, 0)));
        assertEq(uint8(reg.getRun(ID).status), uint8(ITrainingRegistryTypes.RunStatus.Training), "round 1 open");
        assertEq(reg.getRun(ID).currentRound, 1, "current round");
        assertEq(reg.getRun(ID).totalCredits, 24000, "total after round 0");
        uint256[] memory bitmaps = _fill(4, 7);
        bitmaps[3] = 0;
        _commitAs(_rootCommit(ID, 1, 3, bitmaps, _fill(4, 6000)));
        assertEq(uint8(reg.getRun(ID).status), uint8(ITrainingRegistryTypes.RunStatus.Completed), "completed");
        uint256[] memory credits = _fill(4, 12000);
        credits[3] = 6000;
        (bool on, bytes32 f0, bytes32 cr,) = rf.rootState(ID);
        assertTrue(on, "in the root flow");
        assertEq(f0, F0, "initial fragments root");
        assertEq(cr, _creditsRoot(credits), "the registry's own credits root");
        assertEq(reg.getRun(ID).totalCredits, 42000, "total");
        assertTrue(rf.roundCommitment(ID, 1) != bytes32(0), "round 1 committed");

        vm.expectRevert(
            abi.encodeWithSelector(
                ITrainingRegistryRounds.Registry__ChallengeWindowOpen.selector, ID, uint64(block.timestamp) + 20
            )
        );
        rf.sealRootRun(ID);
        vm.warp(block.timestamp + CHALLENGE_SECONDS + 1);
        rf.sealRootRun(ID);
        (, bytes memory receipt) = reg.getReceipt(ID);
        assertEq(receipt.length, 189 + 32 * 2, "receipt of 2 rounds");
        for (uint256 i = 0; i < 4; ++i) {
            assertEq(reg.withdrawable(trainers[i]), MIN_STAKE, "stake back at the seal");
        }

        uint256 paid;
        for (uint16 i = 0; i < 4; ++i) {
            uint256 before = reg.withdrawable(trainers[i]);
            rf.claim(ID, i, credits[i], _proof(credits, i)); // anyone may claim for a trainer
            uint256 reward = reg.withdrawable(trainers[i]) - before;
            assertEq(reward, (POOL * credits[i]) / 42000, "pro-rata reward");
            assertTrue(rf.claimed(ID, i), "claimed bit");
            paid += reward;
        }
        bytes32[] memory p0 = _proof(credits, 0);
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryRounds.Registry__AlreadyClaimed.selector, ID, 0));
        rf.claim(ID, 0, credits[0], p0);

        (,,, uint64 deadline) = rf.rootState(ID);
        vm.expectRevert(
            abi.encodeWithSelector(ITrainingRegistryRounds.Registry__ClaimPeriodOpen.selector, ID, deadline)
        );
        rf.sweep(ID);
        vm.warp(deadline + 1);
        rf.sweep(ID);
        assertEq(reg.withdrawable(sponsor), POOL - paid, "the rounding dust back to the sponsor");
        assertEq(reg.getRun(ID).rewardPoolLeft, 0, "pool emptied");
        uint256 owed = reg.withdrawable(sponsor);
        for (uint256 i = 0; i < 4; ++i) {
            owed += reg.withdrawable(trainers[i]);
        }
        assertEq(token.balanceOf(address(reg)), owed + MIN_SYNCER_STAKE, "conservation");
    }

    // ------------------------------------------------------------ the run's round state

    /// @dev Nobody stakes before the sponsor committed the initial fragments root and the outer
    /// rule; only the sponsor commits them, once, before anyone enrolled.
    function test_useRootFlow_onlySponsor_beforeAnyEnrollment_andEnrollmentWaitsForIt() public {
        _postOnly(_params(ID, 2, 2, 1, 1, POOL));
        _fund(trainers[0], MIN_STAKE);
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__NotRootFlow.selector, ID));
        vm.prank(trainers[0]);
        reg.enrollTrainer(ID, MIN_STAKE, "did:tenzro:trainer");
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__NotSponsor.selector, ID, relayer));
        vm.prank(relayer);
        rf.useRootFlow(ID, F0, _outer());
        vm.prank(sponsor);
        rf.useRootFlow(ID, F0, _outer());
        _enroll(ID, 0, MIN_STAKE);
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryRounds.Registry__RootFlowLocked.selector, ID));
        vm.prank(sponsor);
        rf.useRootFlow(ID, F0, _outer());
    }

    /// @dev Krum has no coordinate proof and a trim of half leaves nothing: neither is taken.
    function test_useRootFlow_onlyProvableRules() public {
        _postOnly(_params(ID, 2, 2, 1, 1, POOL));
        ITrainingRegistryRounds.OuterRule memory o = _outer();
        o.alphaBps = 5000;
        vm.expectRevert(
            abi.encodeWithSelector(ITrainingRegistryRounds.Registry__OuterRuleNotProvable.selector, 1, 5000)
        );
        vm.prank(sponsor);
        rf.useRootFlow(ID, F0, o);
        o.alphaBps = 4999;
        vm.prank(sponsor);
        rf.useRootFlow(ID, F0, o);
        (ITrainingRegistryRounds.OuterRule memory got,,) = rf.outerRule(ID);
        assertEq(got.alphaBps, 4999, "trim stored");
        assertEq(got.mu, 0x3F666666, "momentum stored");
    }

    // ------------------------------------------------------------ what commitRound checks

    function test_commitRound_onlyTheSyncer_openRound_rightLengths() public {
        _startRoot(ID, 2, 2, 2, 2, POOL);
        ITrainingRegistryRounds.RootCommit memory c = _rootCommit(ID, 0, 2, _fill(2, 3), _fill(2, 0));
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__NotSyncer.selector, ID, relayer));
        vm.prank(relayer);
        rf.commitRound(c);
        c.round = 1;
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__WrongRound.selector, ID, 1, 0));
        _commitRaw(c);
        c = _rootCommit(ID, 0, 1, _fill(2, 1), _fill(2, 0));
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryRounds.Registry__CommitLength.selector, 2, 2, 1, 2, 2));
        _commitRaw(c);
        c = _rootCommit(ID, 0, 2, _fill(3, 3), _fill(2, 0));
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryRounds.Registry__CommitLength.selector, 3, 2, 2, 2, 2));
        _commitRaw(c);
    }

    /// @dev Before the deadline every fragment needs K accepted trainers; after it any counts go
    /// (a fragment nobody served keeps its weights); a bit beyond F never goes.
    function test_commitRound_quorumBeforeDeadline_bitmapsBounded() public {
        _startRoot(ID, 3, 2, 2, 2, POOL);
        uint256[] memory bitmaps = _fill(3, 1); // fragment 1 accepted from trainer 0 only
        bitmaps[0] = 3;
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__QuorumNotMet.selector, 1, 1, 2));
        _commitRaw(_rootCommit(ID, 0, 2, bitmaps, _fill(3, 0)));
        bitmaps[2] = 5; // bit 2 of a 2-fragment task
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryRounds.Registry__BadBitmap.selector, 2, 5));
        _commitRaw(_rootCommit(ID, 0, 2, bitmaps, _fill(3, 0)));
        bitmaps[2] = 1;
        vm.warp(block.timestamp + GRACE_MS / 1000 + 1); // past the deadline
        _commitAs(_rootCommit(ID, 0, 2, bitmaps, _fill(3, 0)));
        assertEq(reg.getRound(ID, 0).acceptedCount, 4, "accepted count");
        assertEq(reg.getRun(ID).totalCredits, 3 * 1000 + 2000, "total from the bitmaps");
    }

    /// @dev The previous credits must be the vector behind the committed root: a syncer cannot
    /// start a round from credits of its choosing (all zero before round 0).
    function test_commitRound_previousCreditsMustBeTheCommittedOnes() public {
        _startRoot(ID, 2, 2, 1, 3, POOL);
        uint256[] memory previous = _fill(2, 0);
        previous[1] = 5;
        vm.expectRevert(
            abi.encodeWithSelector(
                ITrainingRegistryRounds.Registry__WrongPreviousCredits.selector, bytes32(uint256(5)), bytes32(0)
            )
        );
        _commitRaw(_rootCommit(ID, 0, 1, _fill(2, 1), previous));
        _commitAs(_rootCommit(ID, 0, 1, _fill(2, 1), _fill(2, 0)));
        (,, bytes32 committed,) = rf.rootState(ID);
        _toRevealPhase(ID);
        previous = _fill(2, 1000);
        previous[1] = 5000; // a sybil's inflated credits
        bytes32 given = _creditsRoot(previous);
        vm.expectRevert(
            abi.encodeWithSelector(ITrainingRegistryRounds.Registry__WrongPreviousCredits.selector, given, committed)
        );
        _commitRaw(_rootCommit(ID, 1, 1, _fill(2, 1), previous));
        _commitAs(_rootCommit(ID, 1, 1, _fill(2, 1), _fill(2, 1000)));
        assertEq(reg.getRun(ID).totalCredits, 4000, "total");
    }

    // ------------------------------------------------------------ claims under attack

    /// @dev A claim must open the final root at the trainer's own index with its own credits.
    function test_claim_wrongCreditsIndexOrProof_refused() public {
        _startRoot(ID, 3, 2, 1, 1, POOL);
        uint256[] memory bitmaps = _fill(3, 1);
        bitmaps[2] = 0;
        _commitAs(_rootCommit(ID, 0, 1, bitmaps, _fill(3, 0)));
        vm.warp(block.timestamp + CHALLENGE_SECONDS + 1);
        rf.sealRootRun(ID);
        uint256[] memory credits = _fill(3, 1000);
        credits[2] = 0;
        bytes32[] memory p0 = _proof(credits, 0);
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryRounds.Registry__BadCreditProof.selector, 0));
        rf.claim(ID, 0, 2000, p0); // more credits than the registry summed
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryRounds.Registry__BadCreditProof.selector, 2));
        rf.claim(ID, 2, 1000, p0); // another trainer's leaf
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryRounds.Registry__BadCreditProof.selector, 3));
        rf.claim(ID, 3, 1000, p0); // no such trainer
        rf.claim(ID, 2, 0, _proof(credits, 2)); // a zero claim is fine and pays nothing
        assertEq(reg.withdrawable(trainers[2]), MIN_STAKE, "stake only");
    }

    /// @dev Nobody credited: no claims, the pool goes straight back to the sponsor at the seal.
    function test_seal_withNoCredits_returnsThePool() public {
        _startRoot(ID, 2, 2, 1, 1, POOL);
        vm.warp(block.timestamp + GRACE_MS / 1000 + 1);
        _commitAs(_rootCommit(ID, 0, 1, _fill(2, 0), _fill(2, 0)));
        vm.warp(block.timestamp + CHALLENGE_SECONDS + 1);
        rf.sealRootRun(ID);
        assertEq(reg.withdrawable(sponsor), POOL, "pool back");
        assertEq(reg.getRun(ID).rewardPoolLeft, 0, "pool emptied");
    }

    // ------------------------------------------------------------ copying (attack 6)

    /// @dev What commitSubmission takes from trainer i for `sp` of the open round.
    function _commitmentOf(bytes32 id, uint256 i, uint16 frag, ITrainingRegistryTypes.SignedPayload memory sp)
        internal
        view
        returns (bytes32)
    {
        ITrainingRegistryTypes.RunView memory v = reg.getRun(id);
        bytes32 sh = RoundProofs.structHash(
            id, v.currentRound, frag, v.weightsRoot, sp.payloadRoot, sp.payloadSumsq, sp.cid, sp.payloadHash
        );
        return keccak256(abi.encode(sh, trainers[i]));
    }

    /// @dev Trainer i's signature over another trainer's submission fields (a copy).
    function _resigned(uint256 i, bytes32 id, uint16 frag, ITrainingRegistryTypes.SignedPayload memory sp)
        internal
        view
        returns (ITrainingRegistryTypes.SignedPayload memory c)
    {
        ITrainingRegistryTypes.RunView memory v = reg.getRun(id);
        c = ITrainingRegistryTypes.SignedPayload({ // a new struct: `c = sp` would alias sp
            payloadRoot: sp.payloadRoot,
            payloadSumsq: sp.payloadSumsq,
            cid: sp.cid,
            payloadHash: sp.payloadHash,
            signature: ""
        });
        (uint8 sv, bytes32 r, bytes32 s_) =
            vm.sign(keys[i], reg.outerGradientDigest(id, v.currentRound, frag, v.weightsRoot, sp));
        c.signature = abi.encodePacked(r, s_, sv);
    }

    /// @dev Attack 6 of the Protocol v2 issue on the forced path. A copycat (trainer 1) copies the
    /// victim's (trainer 0) commitment: it cannot reveal it as its own (the commitment binds the
    /// committer). It front-runs the victim's reveal with the victim's fields re-signed: refused,
    /// it committed to nothing of the kind. It commits the copy after seeing the reveal: the commit
    /// phase is over. Only the victim's submission is live; the copycat is credited nothing.
    function test_attack6_copying_fails() public {
        _openRoot(ID, 3, 2, 1, 1, POOL);
        ITrainingRegistryTypes.SignedPayload memory victim = _signed(0, ID, 0, 0, keccak256("work"), 0x3F800000);
        bytes32 c0 = _commitmentOf(ID, 0, 0, victim);
        vm.prank(trainers[0]);
        rf.commitSubmission(ID, 0, 0, c0);
        vm.prank(trainers[1]);
        rf.commitSubmission(ID, 0, 0, c0); // the copied commitment (it sees the victim's)
        (uint64 closes, uint16 unrevealed) = rf.commitPhase(ID);
        assertEq(unrevealed, 2, "two commitments");
        vm.expectRevert(
            abi.encodeWithSelector(ITrainingRegistryTypes.Registry__CommitPhaseOpen.selector, ID, 0, closes)
        );
        _reveal(ID, 0, 0, victim); // nothing is shown before the phase closes

        vm.warp(closes + 1);
        ITrainingRegistryTypes.SignedPayload memory copy = _resigned(1, ID, 0, victim);
        vm.expectRevert(
            abi.encodeWithSelector(ITrainingRegistryTypes.Registry__NotCommitted.selector, ID, 0, 0, trainers[1])
        );
        _reveal(ID, 0, 0, copy); // front-running the victim's reveal
        _reveal(ID, 0, 0, victim);
        bytes32 late = _commitmentOf(ID, 1, 0, copy);
        vm.expectRevert(
            abi.encodeWithSelector(ITrainingRegistryTypes.Registry__CommitPhaseOver.selector, ID, 0, closes)
        );
        vm.prank(trainers[1]);
        rf.commitSubmission(ID, 0, 0, late); // after the reveal: too late

        (uint256 sub0,) = reg.submissionsOf(ID, 0, trainers[0]);
        (uint256 sub1,) = reg.submissionsOf(ID, 0, trainers[1]);
        assertEq(sub0, 1, "the victim's submission is live");
        assertEq(sub1, 0, "the copycat has none");
        (, unrevealed) = rf.commitPhase(ID);
        assertEq(unrevealed, 1, "the copycat's commitment is never revealed");
    }

    /// @dev The syncer cannot cut off a forced reveal by committing early: before the deadline it
    /// commits only after the commit phase and once every commitment is revealed; after the
    /// deadline an unrevealed commitment no longer holds the round.
    function test_forcedCommitment_holdsTheEarlyCommit() public {
        _openRoot(ID, 2, 2, 1, 2, POOL);
        ITrainingRegistryTypes.SignedPayload memory sp = _signed(0, ID, 0, 0, keccak256("work"), 0x3F800000);
        bytes32 c0 = _commitmentOf(ID, 0, 0, sp);
        vm.prank(trainers[0]);
        rf.commitSubmission(ID, 0, 0, c0);
        ITrainingRegistryRounds.RootCommit memory c = _rootCommit(ID, 0, 1, _fill(2, 1), _fill(2, 0));
        (uint64 closes,) = rf.commitPhase(ID);
        vm.expectRevert(
            abi.encodeWithSelector(ITrainingRegistryTypes.Registry__CommitPhaseOpen.selector, ID, 0, closes)
        );
        _commitRaw(c);
        vm.warp(closes + 1);
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__RevealsPending.selector, ID, 0, 1));
        _commitRaw(c);
        _reveal(ID, 0, 0, sp);
        _commitRaw(c); // revealed: the early commit goes

        // round 1: trainer 1 commits and never reveals; the syncer waits for the deadline
        ITrainingRegistryTypes.SignedPayload memory sp1 = _signed(1, ID, 1, 0, keccak256("more"), 0x3F800000);
        bytes32 c1 = _commitmentOf(ID, 1, 0, sp1);
        vm.prank(trainers[1]);
        rf.commitSubmission(ID, 1, 0, c1);
        c = _rootCommit(ID, 1, 1, _fill(2, 1), _fill(2, 1000));
        _toRevealPhase(ID);
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__RevealsPending.selector, ID, 1, 1));
        _commitRaw(c);
        vm.warp(reg.getRun(ID).roundDeadline + 1);
        _commitRaw(c);
        assertEq(reg.getRun(ID).totalCredits, 4000, "both rounds committed");
    }

    /// @dev A commitment is the sender's: a trainer outside the run and a zero commitment are
    /// refused.
    function test_commitSubmission_refusals() public {
        _openRoot(ID, 2, 2, 1, 1, POOL);
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__NotEnrolled.selector, ID, relayer));
        vm.prank(relayer);
        rf.commitSubmission(ID, 0, 0, keccak256("c"));
        vm.expectRevert(
            abi.encodeWithSelector(ITrainingRegistryTypes.Registry__NotCommitted.selector, ID, 0, 0, trainers[0])
        );
        vm.prank(trainers[0]);
        rf.commitSubmission(ID, 0, 0, bytes32(0));
    }
}
