// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {ITrainingRegistryTypes} from "../../contracts/interfaces/ITrainingRegistryTypes.sol";
import {ITrainingRegistryRounds} from "../../contracts/interfaces/ITrainingRegistryRounds.sol";
import {ITrainingRegistryFull} from "../../contracts/interfaces/ITrainingRegistryFull.sol";
import {ITrainingRegistryEvidence} from "../../contracts/interfaces/ITrainingRegistryEvidence.sol";
import {RegistryBase} from "./RegistryBase.sol";
import {CreditsTree} from "./lib/CreditsTree.sol";
import {RoundProofs} from "../../contracts/lib/RoundProofs.sol";
import {RunRoot} from "../../contracts/lib/RunRoot.sol";
import {ChunkMerkle} from "../../contracts/lib/ChunkMerkle.sol";

/// @notice The attacks of issue #23 (protocol v3) against the root flow, each named after the
/// attack: the attack is run as an attacker would and the test asserts that it fails.
contract ProtocolV3AttacksTest is RegistryBase {
    ITrainingRegistryFull internal rf;
    bytes32 internal constant ID = keccak256("protocol-v3");
    uint256 internal constant POOL = 1_000e18;
    address internal constant SECOND = address(0x5c2);
    address internal constant WATCHER = address(0x3a7c);

    function setUp() public {
        _deploy();
        rf = ITrainingRegistryFull(address(reg));
        _registerSyncer(syncer, MIN_SYNCER_STAKE);
        _registerSyncer(SECOND, MIN_SYNCER_STAKE);
    }

    // ------------------------------------------------------------ helpers

    /// @dev Posts an M-trainer, F-fragment, R-round root-flow task with a syncer fee of `feeBps`,
    /// enrolls M trainers and elects a syncer; returns it.
    function _openRoot(uint16 m, uint16 f, uint32 rounds, uint16 feeBps) internal returns (address elected) {
        ITrainingRegistryTypes.TaskParams memory p = _params(ID, m, m - 1, f, rounds, POOL);
        p.syncerFeeBps = feeBps;
        _post(p);
        for (uint256 i = 0; i < m; ++i) {
            _enroll(ID, i, MIN_STAKE);
        }
        elected = _elect(ID);
    }

    /// @dev The commit of `round` with every trainer accepted on every fragment (m trainers, f
    /// fragments of sizes 1000, 2000, ...), each having `prior` credits before it.
    function _fullCommit(uint32 round, uint16 m, uint16 f, uint256 prior)
        internal
        pure
        returns (ITrainingRegistryRounds.RootCommit memory c)
    {
        c.taskId = ID;
        c.round = round;
        c.fragmentsRoot = keccak256(abi.encode("fragments", ID, round));
        c.acceptedBitmaps = _fill(m, (uint256(1) << f) - 1);
        c.previousCredits = _fill(m, prior);
        c.fragmentHashes = new bytes32[](f);
        for (uint256 j = 0; j < f; ++j) {
            c.fragmentHashes[j] = keccak256(abi.encode(ID, round, j));
        }
        c.transcriptHash = keccak256(abi.encode("transcript", ID, round));
        c.transcriptCid = "bafkreitranscript";
    }

    /// @dev The roots commitRound stored for `c` (m trainers, each gaining `gain` credits).
    function _roots(ITrainingRegistryRounds.RootCommit memory c, uint256 gain)
        internal
        pure
        returns (ITrainingRegistryRounds.RoundRoots memory r)
    {
        uint256 m = c.acceptedBitmaps.length;
        uint256[] memory after_ = new uint256[](m);
        for (uint256 i = 0; i < m; ++i) {
            after_[i] = c.previousCredits[i] + gain;
        }
        (r.creditsRoot,) = CreditsTree.rootAndPath(CreditsTree.leaves(after_), 0);
        r.fragmentsRoot = c.fragmentsRoot;
        r.totalCredits = (c.previousCredits[0] + gain) * m;
        r.bitmapsHash = keccak256(abi.encodePacked(c.acceptedBitmaps));
    }

    /// @dev Commits `c` as `who` once the round's commit phase is over.
    function _commitBy(address who, ITrainingRegistryRounds.RootCommit memory c) internal {
        (uint64 closes,) = rf.commitPhase(ID);
        if (block.timestamp <= closes) vm.warp(closes + 1);
        vm.prank(who);
        rf.commitRound(c);
    }

    // ------------------------------------------------------------ attack 4: successor convicted

    /// Before: a syncer committed a round only it (or its sybil) could convict, went silent and
    /// was replaced; the honest successor committed the next round; the sybil's proof of the
    /// liar's round then slashed the successor (`_slashCommitter` took the latest committer) and
    /// the liar kept its fees, so that fees paid again for the rewound rounds exceeded the budget.
    /// Now: the proof convicts the round's own committer, every discarded round's fee comes back
    /// from whoever was paid it, the successor keeps its bond and its place, and the fees paid
    /// over the whole run are at most the run's budget.
    function test_successorConvicted_fails() public {
        uint16 m = 4;
        uint16 f = 2;
        address liar = _openRoot(m, f, 4, 2000); // fee 1000 * 20 % / 4 = 50 per round
        address successor = liar == syncer ? SECOND : syncer;
        uint256 fee = 50e18;

        // round 0: the liar commits a slot nobody can open (its fragments root is no tree)
        ITrainingRegistryRounds.RootCommit memory c0 = _fullCommit(0, m, f, 0);
        _commitBy(liar, c0);
        ITrainingRegistryRounds.RoundClaim memory a;
        a.taskId = ID;
        a.round = 0;
        a.current = _roots(c0, 3000);
        _fund(WATCHER, SYNCER_BOND);
        vm.prank(WATCHER);
        rf.challengeSlot(a, c0.acceptedBitmaps, 0, 0);

        // the liar goes silent in round 1 and is replaced
        vm.warp(reg.getRun(ID).syncerReplaceableAt + 1);
        assertEq(_elect(ID), successor, "the other candidate");
        _commitBy(successor, _fullCommit(1, m, f, 3000));
        assertEq(rf.syncerFeeOf(ID, successor), fee, "round 1 fee");

        // nobody answers the slot challenge: round 0 is proven wrong
        vm.warp(block.timestamp + CHALLENGE_SECONDS + 1);
        vm.prank(WATCHER);
        rf.expireSlot(a, 0, 0);

        (uint256 stake,,, uint256 locked) = reg.syncerInfo(successor);
        assertEq(stake, MIN_SYNCER_STAKE, "the successor lost stake for a round it did not commit");
        assertEq(locked, SYNCER_BOND, "the successor lost its bond");
        assertEq(reg.getRun(ID).syncer, successor, "the successor lost its place");
        assertEq(rf.syncerFeeOf(ID, liar), 0, "the liar kept the fee of its proven round");
        assertEq(rf.syncerFeeOf(ID, successor), 0, "a discarded round's fee was kept");
        assertEq(reg.getRun(ID).rewardPoolLeft, POOL, "fees of discarded rounds did not come back");

        // the successor commits the run again from round 0: the fees paid are the budget's at most
        for (uint32 r = 0; r < 4; ++r) {
            _commitBy(successor, _fullCommit(r, m, f, 3000 * uint256(r)));
        }
        assertEq(rf.syncerFeeOf(ID, successor), 4 * fee, "four rounds paid");
        assertEq(rf.syncerFeeOf(ID, liar), 0, "the liar is paid nothing");
        assertEq(reg.getRun(ID).rewardPoolLeft, POOL - 4 * fee, "fees exceed the run's budget");
    }

    /// @dev A slot challenge of trainer 0, fragment 0 in committed round `round` (commit `c`,
    /// previous commit `p` when round > 0), by WATCHER; returns the claim it names.
    function _challengeSlot(
        uint32 round,
        ITrainingRegistryRounds.RootCommit memory c,
        ITrainingRegistryRounds.RootCommit memory p
    ) internal returns (ITrainingRegistryRounds.RoundClaim memory a) {
        a.taskId = ID;
        a.round = round;
        a.current = _roots(c, 3000);
        if (round != 0) {
            a.previous = _roots(p, 3000);
            a.previousWeightsRoot = RunRoot.weightsRoot(p.fragmentHashes);
        }
        _fund(WATCHER, SYNCER_BOND);
        vm.prank(WATCHER);
        rf.challengeSlot(a, c.acceptedBitmaps, 0, 0);
    }

    /// The liar commits rounds 0 and 1 (both unopenable) and is replaced; the successor commits
    /// round 2. The proof of round 1 takes back the liar's round-1 fee and the successor's
    /// round-2 fee, and leaves the liar round 0's; the successor commits round 1 again; the proof
    /// of round 0 then convicts the liar (a past committer), never the successor.
    function test_successorConvicted_pastCommitterOfAnEarlierRound() public {
        uint16 m = 4;
        uint16 f = 2;
        address liar = _openRoot(m, f, 4, 2000);
        address successor = liar == syncer ? SECOND : syncer;
        uint256 fee = 50e18;
        ITrainingRegistryRounds.RootCommit memory c0 = _fullCommit(0, m, f, 0);
        ITrainingRegistryRounds.RootCommit memory c1 = _fullCommit(1, m, f, 3000);
        _commitBy(liar, c0);
        ITrainingRegistryRounds.RoundClaim memory a0 = _challengeSlot(0, c0, c0);
        _commitBy(liar, c1);
        ITrainingRegistryRounds.RoundClaim memory a1 = _challengeSlot(1, c1, c0);

        vm.warp(reg.getRun(ID).syncerReplaceableAt + 1);
        assertEq(_elect(ID), successor, "the other candidate");
        _commitBy(successor, _fullCommit(2, m, f, 6000));

        rf.expireSlot(a1, 0, 0);
        assertEq(rf.syncerFeeOf(ID, liar), fee, "the liar keeps round 0's fee only");
        assertEq(rf.syncerFeeOf(ID, successor), 0, "round 2's fee came back");
        assertEq(reg.getRun(ID).rewardPoolLeft, POOL - fee, "one round paid");
        assertEq(reg.getRun(ID).syncer, successor, "the successor goes on");

        _commitBy(successor, c1);
        rf.expireSlot(a0, 0, 0);
        (uint256 stake,,, uint256 locked) = reg.syncerInfo(successor);
        assertEq(stake, MIN_SYNCER_STAKE, "the successor lost stake for a round it did not commit");
        assertEq(locked, SYNCER_BOND, "the successor lost its bond");
        assertEq(rf.syncerFeeOf(ID, liar), 0, "the liar kept the fee of its proven round");
        assertEq(rf.syncerFeeOf(ID, successor), 0, "a discarded round's fee was kept");
        assertEq(reg.getRun(ID).rewardPoolLeft, POOL, "every discarded round's fee came back");
        assertEq(reg.getRun(ID).currentRound, 0, "round 0 open again");
    }

    // ------------------------------------------------------------ attack 1: availability loop

    /// @dev Trainer i commits to a forced submission of fragment 0 of the open round over `work`.
    function _commitWork(uint256 i, bytes32 work) internal returns (ITrainingRegistryTypes.SignedPayload memory sp) {
        sp = _signed(i, ID, reg.getRun(ID).currentRound, 0, work, 0x3F800000);
        _commitForced(ID, i, 0, sp);
    }

    /// Before: a trainer forced a submission and its sybil challenged a chunk of it; at each
    /// answer deadline one transaction answered and challenged the next chunk, so openChallenges
    /// was never 0, commitRound never went, and each elected syncer was replaced (its bond burned)
    /// for a commit it could not make. Now: no availability challenge opens later than one window
    /// after the round's deadline, so the last one is settled by roundDeadline + 2 *
    /// challengeSeconds, and the syncer's replacement clock starts only after the last answer
    /// deadline of the round's challenges.
    function test_availabilityLoop_fails() public {
        address elected = _openRoot(3, 1, 2, 0);
        ITrainingRegistryTypes.SignedPayload memory sp0 = _commitWork(0, keccak256("work 0"));
        ITrainingRegistryTypes.SignedPayload memory sp1 = _commitWork(1, keccak256("work 1"));
        (uint64 closes,) = rf.commitPhase(ID);
        vm.warp(closes + 1);
        _reveal(ID, 0, 0, sp0);
        _reveal(ID, 0, 0, sp1);

        // the sybil challenges at the last second it may: the syncer cannot commit until it is settled
        uint64 deadline = reg.getRun(ID).roundDeadline;
        uint64 lastOpen = deadline + CHALLENGE_SECONDS;
        vm.warp(lastOpen);
        _fund(WATCHER, SYNCER_BOND);
        vm.prank(WATCHER);
        ev.challengeAvailability(ID, 0, 0, trainers[0], sp0, 0);
        assertEq(
            reg.getRun(ID).syncerReplaceableAt,
            lastOpen + CHALLENGE_SECONDS + SYNCER_TIMEOUT,
            "the replacement clock ran while a challenge blocked the commit"
        );

        // the loop's next step, a window after the round's deadline, is refused
        vm.warp(lastOpen + 1);
        vm.prank(WATCHER);
        vm.expectRevert(
            abi.encodeWithSelector(ITrainingRegistryTypes.Registry__DeadlinePassed.selector, ID, 0, lastOpen)
        );
        ev.challengeAvailability(ID, 0, 0, trainers[1], sp1, 0);

        // the challenge lapses; the syncer commits, still in time, and keeps its bond
        vm.warp(lastOpen + CHALLENGE_SECONDS + 1);
        ev.expireAvailability(ID, 0, 0, trainers[0]);
        ITrainingRegistryRounds.RootCommit memory c = _fullCommit(0, 3, 1, 0);
        c.acceptedBitmaps[0] = 0; // rejected by the expiry
        vm.prank(elected);
        rf.commitRound(c);
        assertEq(reg.getRun(ID).currentRound, 1, "the round committed");
        (uint256 stake,,, uint256 locked) = reg.syncerInfo(elected);
        assertEq(stake, MIN_SYNCER_STAKE, "the blocked syncer lost its stake");
        assertEq(locked, SYNCER_BOND, "the blocked syncer lost its bond");
    }

    /// Before: a sybil challenged a submission, the trainer answered, and the sybil challenged it
    /// again, as often as it liked until one window after the round's deadline: each answer costs
    /// the trainer a transaction (and the run a window of delay), so the honest trainer was
    /// loaded without end. Now: a submission answers at most MAX_AVAILABILITY_CHALLENGES
    /// challenges over its life; one more reverts Registry__ChallengeLimit.
    function test_availabilityLoop_challengesBoundedPerSubmission() public {
        bytes32 id = keccak256("availability-bound");
        ITrainingRegistryTypes.TaskParams memory p = _params(id, 2, 1, 1, 1, 100e18);
        p.fragmentSizes[0] = 16; // one chunk: the payload root is its leaf
        _post(p);
        _enroll(id, 0, MIN_STAKE);
        _enroll(id, 1, MIN_STAKE);
        _elect(id);
        bytes memory chunk = new bytes(64);
        chunk[0] = 0x3F;
        chunk[1] = 0x80; // value 0 = 1.0, the rest +0
        (bytes32 root, uint32 sumsq) = ChunkMerkle.leaf(chunk);
        ITrainingRegistryTypes.SignedPayload memory sp = _signed(0, id, 0, 0, root, sumsq);
        _force(id, 0, 0, sp);
        ITrainingRegistryTypes.ChunkOpening memory o;
        o.chunk = chunk;
        o.siblingH = new bytes32[](0);
        o.siblingS = new uint32[](0);

        uint256 limit = 3; // RegistryStorage.MAX_AVAILABILITY_CHALLENGES
        _fund(WATCHER, SYNCER_BOND * 4);
        for (uint256 k = 0; k < limit; ++k) {
            vm.prank(WATCHER);
            ev.challengeAvailability(id, 0, 0, trainers[0], sp, 0);
            vm.prank(trainers[0]);
            ev.answerAvailability(id, 0, 0, trainers[0], o);
        }
        vm.prank(WATCHER);
        vm.expectRevert(
            abi.encodeWithSelector(
                ITrainingRegistryTypes.Registry__ChallengeLimit.selector,
                id,
                uint32(0),
                uint16(0),
                trainers[0],
                uint8(limit)
            )
        );
        ev.challengeAvailability(id, 0, 0, trainers[0], sp, 0);
        assertEq(ev.challengeBondsHeld(), 0, "no bond held");
    }

    // ------------------------------------------------------------ a run that cannot go on

    /// Before: a syncer committed round 0 and went silent with no other candidate able to take
    /// the run (electSyncer reverts Registry__NoSyncerCandidates): the run stayed Training for
    /// ever, the pool, every stake and the syncer's fee held. Now: once the syncer is replaceable
    /// and no candidate can be elected, anyone cancels it: trainers get their stakes back and
    /// their pot for the committed round (claims), the silent syncer loses its bond but keeps
    /// the fee of the round it committed, the sponsor gets the rest of the pool; every token of
    /// the pool is accounted for.
    function test_runEnds_cancelWhenNoSyncerCanBeElected() public {
        uint16 m = 4;
        uint16 f = 2;
        address silent = _openRoot(m, f, 4, 2000); // N = 4, fee 50 per round
        address other = silent == syncer ? SECOND : syncer;
        ITrainingRegistryRounds.RootCommit memory c0 = _fullCommit(0, m, f, 0);
        _commitBy(silent, c0);

        // too early: the syncer is not replaceable yet
        uint64 replaceableAt = reg.getRun(ID).syncerReplaceableAt;
        vm.expectRevert(
            abi.encodeWithSelector(
                ITrainingRegistryTypes.Registry__SyncerStillActive.selector, ID, silent, replaceableAt
            )
        );
        ev.cancelStalledRun(ID);
        uint64 window = reg.getRound(ID, 0).finalizedAt + CHALLENGE_SECONDS;
        vm.warp((replaceableAt > window ? replaceableAt : window) + 1);
        // a candidate could take the run: elect it instead
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__RunCanGoOn.selector, ID, other));
        ev.cancelStalledRun(ID);

        // the last other candidate leaves: nobody can be elected
        _leavePool(other);
        reg.requestSyncerElection(ID);
        vm.roll(block.number + 1);
        vm.expectRevert(ITrainingRegistryTypes.Registry__NoSyncerCandidates.selector);
        reg.electSyncer(ID);

        uint256 sponsorBefore = reg.withdrawable(sponsor);
        ev.cancelStalledRun(ID);
        assertEq(uint8(reg.getRun(ID).status), uint8(ITrainingRegistryTypes.RunStatus.Cancelled), "cancelled");
        uint256 back = reg.withdrawable(sponsor) - sponsorBefore;
        assertEq(back, 750e18, "the sponsor gets the pool of the 3 rounds never run");
        for (uint256 i = 0; i < m; ++i) {
            assertEq(reg.withdrawable(trainers[i]), MIN_STAKE, "stake refunded");
        }
        (uint256 stake,,, uint256 locked) = reg.syncerInfo(silent);
        assertEq(stake, MIN_SYNCER_STAKE - SYNCER_BOND, "the silent syncer's bond is burned");
        assertEq(locked, 0, "no bond left locked");
        vm.prank(silent);
        assertEq(reg.claimSyncerFee(ID), 50e18, "the fee of the committed round");

        // each trainer claims its share of the committed round's pot
        uint256 paid = 0;
        bytes32[] memory l = CreditsTree.leaves(_fill(m, 3000));
        for (uint256 i = 0; i < m; ++i) {
            (, bytes32[] memory path) = CreditsTree.rootAndPath(l, i);
            rf.claim(ID, uint16(i), 3000, path);
            paid += reg.withdrawable(trainers[i]) - MIN_STAKE;
        }
        assertEq(paid, 200e18, "the trainers' pot: (1000 - 4 * 50) * 1 / 4");
        assertEq(back + paid + 50e18, POOL, "every token of the pool accounted for");
        vm.expectRevert(
            abi.encodeWithSelector(
                ITrainingRegistryTypes.Registry__WrongStatus.selector, ID, ITrainingRegistryTypes.RunStatus.Cancelled
            )
        );
        ev.cancelStalledRun(ID);
    }

    /// A stall after rounds that credited nobody: claims would divide by zero credits, so before
    /// the fix the trainers' pot sat in the registry until the sweep, 90 days later. Now the whole
    /// pool left goes back to the sponsor at once, as at the seal, and nothing is claimable.
    function test_runEnds_cancelAfterRoundsWithoutCredit_returnsThePoolAtOnce() public {
        uint16 m = 4;
        address silent = _openRoot(m, 2, 4, 2000); // N = 4, fee 50 per round
        address other = silent == syncer ? SECOND : syncer;
        vm.warp(reg.getRun(ID).roundDeadline + 1); // after the deadline: a round without quorum commits
        _commitBy(silent, _rootCommit(ID, 0, 2, _fill(m, 0), _fill(m, 0)));
        _leavePool(other);
        uint64 replaceableAt = reg.getRun(ID).syncerReplaceableAt;
        uint64 window = reg.getRound(ID, 0).finalizedAt + CHALLENGE_SECONDS;
        vm.warp((replaceableAt > window ? replaceableAt : window) + 1);
        uint256 sponsorBefore = reg.withdrawable(sponsor);
        ev.cancelStalledRun(ID);
        assertEq(reg.withdrawable(sponsor) - sponsorBefore, POOL - 50e18, "the pool but the committed round's fee");
        assertEq(reg.getRun(ID).rewardPoolLeft, 0, "nothing left to claim or sweep");
        vm.prank(silent);
        assertEq(reg.claimSyncerFee(ID), 50e18, "the fee of the committed round");
    }

    /// @dev Posts an m-trainer root-flow task of one fragment of 16 values (one chunk: a vector's
    /// root is its leaf) and `rounds` rounds, enrolls and elects; returns the syncer.
    function _openOneChunk(uint16 m, uint32 rounds) internal returns (address elected) {
        ITrainingRegistryTypes.TaskParams memory p = _params(ID, m, m - 1, 1, rounds, POOL);
        p.fragmentSizes[0] = 16;
        _post(p);
        for (uint256 i = 0; i < m; ++i) {
            _enroll(ID, i, MIN_STAKE);
        }
        elected = _elect(ID);
    }

    /// @dev A 64-byte chunk whose value 0 has bit pattern `v0` and the rest +0.
    function _chunk(uint32 v0) internal pure returns (bytes memory c) {
        c = new bytes(64);
        c[0] = bytes1(uint8(v0 >> 24));
        c[1] = bytes1(uint8(v0 >> 16));
        c[2] = bytes1(uint8(v0 >> 8));
        c[3] = bytes1(uint8(v0));
    }

    /// @dev The one-chunk opening of `chunk` (no siblings).
    function _opening(bytes memory chunk) internal pure returns (ITrainingRegistryTypes.ChunkOpening memory o) {
        o.chunk = chunk;
        o.siblingH = new bytes32[](0);
        o.siblingS = new uint32[](0);
    }

    /// @dev Fragment 0's leaf with weights `w` (one chunk) and a zero momentum chunk; with
    /// `lie` the weights' sum of squares is not its tree's (1.0 over an all-zero chunk).
    function _leaf(bytes memory w, bool lie) internal pure returns (RoundProofs.FragmentLeaf memory l) {
        (bytes32 wh, uint32 ws) = ChunkMerkle.leaf(w);
        (bytes32 mh, uint32 ms) = ChunkMerkle.leaf(new bytes(64));
        l = RoundProofs.FragmentLeaf({
            fragment: 0,
            acceptedRoot: bytes32(0),
            acceptedCount: 0,
            weightsRoot: wh,
            weightsSumsq: lie ? 0x3F800000 : ws,
            momentumRoot: mh,
            momentumSumsq: ms
        });
    }

    /// @dev Round `round`'s commit (m trainers, fragment 0 accepted for all) whose fragments root
    /// is `leaf` (F = 1: the root is the leaf).
    function _leafCommit(uint32 round, uint16 m, RoundProofs.FragmentLeaf memory leaf, uint256 prior)
        internal
        pure
        returns (ITrainingRegistryRounds.RootCommit memory c)
    {
        c = _fullCommit(round, m, 1, prior);
        c.fragmentsRoot = RoundProofs.fragmentLeaf(leaf);
        c.fragmentHashes[0] = leaf.weightsRoot; // the receipt names the committed weights
    }

    /// @dev The answer to a weights challenge of fragment 0 of commit `c` (F = 1: no leaf path).
    function _answer(
        ITrainingRegistryRounds.RootCommit memory c,
        RoundProofs.FragmentLeaf memory leaf,
        bytes memory chunk
    ) internal pure returns (ITrainingRegistryEvidence.WeightsOpening memory w) {
        w.leaf = leaf;
        w.leafPath = new bytes32[](0);
        w.fragmentHashes = c.fragmentHashes;
        w.opening = _opening(chunk);
    }

    /// Before: a syncer committed a fragment leaf whose weights nobody could open (the all-zero
    /// "model" of the issue: a weights root over zeros with a sum of squares that is not its
    /// tree's, or a vector never published), so proveAggregate reverted at every coordinate; the
    /// run sealed, the syncer kept bond and fee, and every later round was unprovable too. Now:
    /// anyone demands a chunk of the committed weights (challengeWeights, bonded); nobody can
    /// open it, so after the deadline expireWeights convicts the round's committer: its bond is
    /// slashed, its fee comes back, the run is rewound to the round before, and the challenger
    /// gets its bond back and the bounty.
    function test_unopenableWeights_fails() public {
        uint16 m = 3;
        address liar = _openOneChunk(m, 2);
        ITrainingRegistryRounds.RootCommit memory c0 = _leafCommit(0, m, _leaf(new bytes(64), true), 0);
        _commitBy(liar, c0);
        ITrainingRegistryRounds.RoundClaim memory a;
        a.taskId = ID;
        a.round = 0;
        a.current = _roots(c0, 16);

        _fund(WATCHER, SYNCER_BOND);
        uint256 bond = ev.challengeBond(ID);
        vm.prank(WATCHER);
        rf.challengeWeights(ID, 0, 0, false, 0);
        // the all-zero chunk does not open the committed root (its sum is not the tree's)
        ITrainingRegistryTypes.ChunkOpening memory o = _opening(new bytes(64));
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__BadOpening.selector, uint32(0)));
        ev.answerWeights(ID, 0, 0, false, a.current, _answer(c0, _leaf(new bytes(64), true), o.chunk));
        // the seal waits for the challenge
        vm.warp(block.timestamp + CHALLENGE_SECONDS + 1);
        _commitBy(liar, _leafCommit(1, m, _leaf(new bytes(64), true), 16));
        vm.warp(block.timestamp + CHALLENGE_SECONDS + 1);
        vm.expectRevert(
            abi.encodeWithSelector(ITrainingRegistryTypes.Registry__ChallengesPending.selector, ID, uint16(1))
        );
        rf.sealRootRun(ID);

        uint256 before = reg.withdrawable(WATCHER);
        rf.expireWeights(a, 0, false, 0);
        (uint256 stake,,, uint256 locked) = reg.syncerInfo(liar);
        assertEq(stake, MIN_SYNCER_STAKE - SYNCER_BOND, "the liar kept its bond");
        assertEq(locked, 0, "the bond is still locked");
        assertEq(reg.getRun(ID).syncer, address(0), "the liar is still the syncer");
        assertEq(uint8(reg.getRun(ID).status), uint8(ITrainingRegistryTypes.RunStatus.Training), "the run sealed");
        assertEq(reg.getRun(ID).currentRound, 0, "the run was not rewound");
        assertEq(reg.getRun(ID).rewardPoolLeft, POOL, "the liar's fees did not come back");
        assertEq(reg.withdrawable(WATCHER) - before, bond + SYNCER_BOND / 10, "bond back and the bounty");
        assertEq(ev.challengeBondsHeld(), 0, "no bond held");
    }

    /// The honest side of attack 2: a syncer whose weights and momentum are published answers a
    /// weights and a momentum challenge (the bonds go to it), keeps its bond and its round, and
    /// the run seals. A challenge outside the round's window is refused, and so is a chunk past
    /// the fragment's end.
    function test_unopenableWeights_honestSyncerAnswers() public {
        uint16 m = 3;
        address honest = _openOneChunk(m, 1);
        bytes memory w = _chunk(0x3F800000);
        RoundProofs.FragmentLeaf memory leaf = _leaf(w, false);
        ITrainingRegistryRounds.RootCommit memory c0 = _leafCommit(0, m, leaf, 0);
        _commitBy(honest, c0);
        ITrainingRegistryRounds.RoundRoots memory roots = _roots(c0, 16);

        _fund(WATCHER, 2 * SYNCER_BOND);
        uint256 bond = ev.challengeBond(ID);
        vm.startPrank(WATCHER);
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__BadOpening.selector, uint32(1)));
        rf.challengeWeights(ID, 0, 0, false, 1);
        rf.challengeWeights(ID, 0, 0, false, 0);
        rf.challengeWeights(ID, 0, 0, true, 0);
        vm.expectRevert(
            abi.encodeWithSelector(
                ITrainingRegistryTypes.Registry__ChallengePending.selector, ID, uint32(0), uint16(0), address(0)
            )
        );
        rf.challengeWeights(ID, 0, 0, true, 0);
        vm.stopPrank();

        uint256 before = reg.withdrawable(honest);
        vm.startPrank(honest);
        ev.answerWeights(ID, 0, 0, false, roots, _answer(c0, leaf, w));
        ev.answerWeights(ID, 0, 0, true, roots, _answer(c0, leaf, new bytes(64)));
        vm.stopPrank();
        assertEq(reg.withdrawable(honest) - before, 2 * bond, "the answerer gets both bonds");
        assertEq(reg.getRound(ID, 0).challengeStatus, 1, "the receipt shows a challenge lost");

        vm.warp(block.timestamp + CHALLENGE_SECONDS + 1);
        vm.prank(WATCHER);
        vm.expectRevert(
            abi.encodeWithSelector(
                ITrainingRegistryRounds.Registry__ChallengeWindowClosed.selector,
                ID,
                uint32(0),
                reg.getRound(ID, 0).finalizedAt + CHALLENGE_SECONDS
            )
        );
        rf.challengeWeights(ID, 0, 0, false, 0);
        rf.sealRootRun(ID);
        (uint256 stake,,, uint256 locked) = reg.syncerInfo(honest);
        assertEq(stake, MIN_SYNCER_STAKE, "the honest syncer lost stake");
        assertEq(locked, 0, "bond released at the seal");
        assertEq(ev.challengeBondsHeld(), 0, "no bond held");
    }

    // ------------------------------------------------------------ attack 3: receipt model hash

    /// Before: commitRound took `fragmentHashes` (the receipt's final model hash, RunRoot over
    /// them, and what trainers download) beside the fragments root, and no proof read them: a
    /// syncer committed openable, correct weights for the proofs and named another model in the
    /// receipt, which an escrow then paid for. Now: in the root flow fragmentHashes[f] is the §2
    /// root of fragment f's new weights, and a weights challenge is answered only with the round's
    /// fragment hashes (checked against its digest) whose entry f is the leaf's weights root; a
    /// syncer that named another model cannot answer, and expireWeights convicts it.
    function test_receiptModelHash_fails() public {
        uint16 m = 3;
        address liar = _openOneChunk(m, 1);
        bytes memory w = _chunk(0x3F800000);
        RoundProofs.FragmentLeaf memory leaf = _leaf(w, false);
        ITrainingRegistryRounds.RootCommit memory c0 = _leafCommit(0, m, leaf, 0);
        c0.fragmentHashes[0] = sha256("another model"); // what the receipt and the downloaders get
        _commitBy(liar, c0);
        ITrainingRegistryRounds.RoundClaim memory a;
        a.taskId = ID;
        a.round = 0;
        a.current = _roots(c0, 16);

        _fund(WATCHER, SYNCER_BOND);
        vm.prank(WATCHER);
        rf.challengeWeights(ID, 0, 0, false, 0);
        // the weights open, but the receipt names another model
        vm.prank(liar);
        vm.expectRevert(
            abi.encodeWithSelector(ITrainingRegistryEvidence.Registry__WrongModelHash.selector, uint32(0), uint16(0))
        );
        ev.answerWeights(ID, 0, 0, false, a.current, _answer(c0, leaf, w));
        // nor can it swap in the leaf's root: the hashes are checked against the round's digest
        ITrainingRegistryEvidence.WeightsOpening memory forged = _answer(c0, leaf, w);
        forged.fragmentHashes = new bytes32[](1);
        forged.fragmentHashes[0] = leaf.weightsRoot;
        vm.prank(liar);
        vm.expectRevert(
            abi.encodeWithSelector(ITrainingRegistryEvidence.Registry__WrongModelHash.selector, uint32(0), uint16(0))
        );
        ev.answerWeights(ID, 0, 0, false, a.current, forged);

        vm.warp(block.timestamp + CHALLENGE_SECONDS + 1);
        rf.expireWeights(a, 0, false, 0);
        (uint256 stake,,,) = reg.syncerInfo(liar);
        assertEq(stake, MIN_SYNCER_STAKE - SYNCER_BOND, "the liar kept its bond");
        assertEq(uint8(reg.getRun(ID).status), uint8(ITrainingRegistryTypes.RunStatus.Training), "the run completed");
        assertEq(reg.getRun(ID).currentRound, 0, "round 0 stands with another model in its receipt");
    }

    // ------------------------------------------------------------ attack 5: withheld forced payload

    uint32 internal constant WHOLE = type(uint32).max;

    event log_named_uint(string key, uint256 val);

    /// @dev The 4 chunks (64 values) of a payload whose value 16 j is j + 1 (the rest +0), with
    /// its §2 commitment and leaf sums.
    function _payload4() internal pure returns (bytes memory all, uint32[] memory sums, bytes32 root, uint32 sumsq) {
        uint32[4] memory ones = [uint32(0x3F800000), 0x40000000, 0x40400000, 0x40800000];
        bytes32[4] memory h;
        sums = new uint32[](4);
        for (uint256 j = 0; j < 4; ++j) {
            bytes memory c = _chunk(ones[j]);
            (h[j], sums[j]) = ChunkMerkle.leaf(c);
            all = bytes.concat(all, c);
        }
        (bytes32 l, uint32 ls) = ChunkMerkle.node(h[0], sums[0], h[1], sums[1]);
        (bytes32 r, uint32 rs) = ChunkMerkle.node(h[2], sums[2], h[3], sums[3]);
        (root, sumsq) = ChunkMerkle.node(l, ls, r, rs);
    }

    /// @dev Opens a 3-trainer, one-fragment (64 values) root-flow run; trainer 0 forces the
    /// payload of _payload4 (commit, then reveal); returns the syncer and the signed submission.
    function _forcedWhole() internal returns (address elected, ITrainingRegistryTypes.SignedPayload memory sp) {
        ITrainingRegistryTypes.TaskParams memory p = _params(ID, 3, 2, 1, 2, POOL);
        p.fragmentSizes[0] = 64;
        _post(p);
        for (uint256 i = 0; i < 3; ++i) {
            _enroll(ID, i, MIN_STAKE);
        }
        elected = _elect(ID);
        (,, bytes32 root, uint32 sumsq) = _payload4();
        sp = _signed(0, ID, 0, 0, root, sumsq);
        _force(ID, 0, 0, sp);
    }

    /// @dev The whole-payload answer of _payload4 (`chunks` chunks of it).
    function _whole(uint256 chunks) internal pure returns (ITrainingRegistryTypes.ChunkOpening memory o) {
        (bytes memory all, uint32[] memory sums,,) = _payload4();
        o.chunkIndex = WHOLE;
        o.chunk = new bytes(64 * chunks);
        for (uint256 k = 0; k < o.chunk.length; ++k) {
            o.chunk[k] = all[k];
        }
        o.siblingH = new bytes32[](0);
        o.siblingS = new uint32[](chunks);
        for (uint256 k = 0; k < chunks; ++k) {
            o.siblingS[k] = sums[k];
        }
    }

    /// Before: a trainer forced a submission and answered only the chunk it was challenged on, at
    /// the last second; the syncer could not obtain the rest and had to accept it (a withheld chunk
    /// then proved its aggregate wrong) or leave it out (proveOmission convicted it): the honest
    /// syncer lost its bond either way. Now: the syncer challenges the whole payload
    /// (chunkIndex WHOLE_PAYLOAD), which only every chunk answers; one chunk does not, so the
    /// submission lapses, and the honest syncer that leaves it out is not convicted.
    function test_withheldForcedPayload_fails() public {
        (address honest, ITrainingRegistryTypes.SignedPayload memory sp) = _forcedWhole();
        _fund(honest, SYNCER_BOND);
        vm.prank(honest);
        ev.challengeAvailability(ID, 0, 0, trainers[0], sp, WHOLE);

        // the trainer answers the chunks it likes: one chunk, or three of four, is no answer
        (bytes memory all,,,) = _payload4();
        ITrainingRegistryTypes.ChunkOpening memory one = _opening(_chunk(0x3F800000));
        one.siblingH = new bytes32[](2);
        one.siblingS = new uint32[](2);
        vm.startPrank(trainers[0]);
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__BadOpening.selector, uint32(0)));
        ev.answerAvailability(ID, 0, 0, trainers[0], one);
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__BadOpening.selector, WHOLE));
        ev.answerAvailability(ID, 0, 0, trainers[0], _whole(3));
        vm.stopPrank();
        assertEq(all.length, 256, "four chunks");

        // unanswered: the submission lapses; the syncer commits without it
        vm.warp(block.timestamp + CHALLENGE_SECONDS + 1);
        ev.expireAvailability(ID, 0, 0, trainers[0]);
        vm.warp(reg.getRun(ID).roundDeadline + 1);
        ITrainingRegistryRounds.RootCommit memory c = _fullCommit(0, 3, 1, 0);
        c.acceptedBitmaps[0] = 0;
        vm.prank(honest);
        rf.commitRound(c);
        ITrainingRegistryRounds.RoundClaim memory a = _claimWithoutTrainer0(c);
        vm.expectRevert(
            abi.encodeWithSelector(ITrainingRegistryRounds.Registry__NoMismatch.selector, uint16(0), uint256(0))
        );
        rf.proveOmission(a, c.acceptedBitmaps, 0, 0);
        (uint256 stake,,, uint256 locked) = reg.syncerInfo(honest);
        assertEq(locked, SYNCER_BOND, "the honest syncer lost its bond");
        assertEq(stake, MIN_SYNCER_STAKE, "the honest syncer lost stake");
    }

    /// The honest side of attack 5: a trainer that answers the whole-payload challenge with every
    /// chunk gets the bond, its submission stays live (the payload is now public in the answer),
    /// and a syncer that leaves it out is convicted by proveOmission.
    function test_withheldForcedPayload_wholeAnswerKeepsItLive() public {
        (address elected, ITrainingRegistryTypes.SignedPayload memory sp) = _forcedWhole();
        _fund(WATCHER, SYNCER_BOND);
        uint256 bond = ev.challengeBond(ID);
        vm.prank(WATCHER);
        ev.challengeAvailability(ID, 0, 0, trainers[0], sp, WHOLE);
        uint256 before = reg.withdrawable(trainers[0]);
        uint256 g = gasleft();
        vm.prank(trainers[0]);
        ev.answerAvailability(ID, 0, 0, trainers[0], _whole(4));
        emit log_named_uint("whole-payload answer gas, 4 chunks (incl. the call's ABI copy)", g - gasleft());
        assertEq(reg.withdrawable(trainers[0]) - before, bond, "the trainer gets the bond");

        vm.warp(reg.getRun(ID).roundDeadline + 1);
        ITrainingRegistryRounds.RootCommit memory c = _fullCommit(0, 3, 1, 0);
        c.acceptedBitmaps[0] = 0; // left out although wholly available
        vm.prank(elected);
        rf.commitRound(c);
        ITrainingRegistryRounds.RoundClaim memory a = _claimWithoutTrainer0(c);
        rf.proveOmission(a, c.acceptedBitmaps, 0, 0);
        (uint256 stake,,,) = reg.syncerInfo(elected);
        assertEq(stake, MIN_SYNCER_STAKE - SYNCER_BOND, "the omission of an available payload went unpunished");
    }

    // ------------------------------------------------------------ commit never reveal

    /// Before: a trainer committed a forced submission and never revealed it; the early commit
    /// waits for every reveal, so the round was held to its deadline and the trainer paid only
    /// the commitment's gas. Now: once the round is committed (in the opening the commitment was
    /// made in, whose reveal phase therefore ran whole), anyone may slash the lapsed commitment,
    /// within the round's challenge window: INVALID_SLASH_BPS of the trainer's remaining stake,
    /// burned (the caller gets nothing), once. A trainer that revealed is not touched.
    function test_commitNeverReveal_costsTheCommitter() public {
        address elected = _openRoot(3, 1, 2, 0);
        ITrainingRegistryTypes.SignedPayload memory sp0 = _commitWork(0, keccak256("work 0"));
        _commitWork(1, keccak256("never revealed"));
        _commitWork(2, keccak256("never revealed either"));
        _toRevealPhase(ID);
        _reveal(ID, 0, 0, sp0);

        // the commitment never revealed holds the round to its deadline
        ITrainingRegistryRounds.RootCommit memory c = _fullCommit(0, 3, 1, 0);
        c.acceptedBitmaps[1] = 0;
        c.acceptedBitmaps[2] = 0;
        vm.prank(elected);
        vm.expectRevert(
            abi.encodeWithSelector(ITrainingRegistryTypes.Registry__RevealsPending.selector, ID, uint32(0), uint16(2))
        );
        rf.commitRound(c);

        // not before the round is committed: the reveal phase is still the trainer's
        vm.expectRevert(
            abi.encodeWithSelector(ITrainingRegistryRounds.Registry__RoundNotCommitted.selector, ID, uint32(0))
        );
        ev.slashUnrevealed(ID, 0, 0, trainers[1]);

        vm.warp(reg.getRun(ID).roundDeadline + 1);
        vm.prank(elected);
        rf.commitRound(c);

        uint256 burnedBefore = reg.burned();
        uint256 watcherBefore = reg.withdrawable(WATCHER);
        vm.prank(WATCHER);
        ev.slashUnrevealed(ID, 0, 0, trainers[1]);
        uint256 expected = MIN_STAKE / 20; // INVALID_SLASH_BPS: 5 %
        assertEq(reg.trainerMetrics(ID, trainers[1]).slashed, expected, "the trainer that never revealed kept its stake");
        assertEq(reg.burned() - burnedBefore, expected, "the slash was not burned");
        assertEq(reg.withdrawable(WATCHER), watcherBefore, "the caller profited from the slash");

        // once; never the trainer that revealed; not after the round's challenge window
        vm.expectRevert(
            abi.encodeWithSelector(
                ITrainingRegistryTypes.Registry__NotCommitted.selector, ID, uint32(0), uint16(0), trainers[1]
            )
        );
        ev.slashUnrevealed(ID, 0, 0, trainers[1]);
        vm.expectRevert(
            abi.encodeWithSelector(
                ITrainingRegistryTypes.Registry__NotCommitted.selector, ID, uint32(0), uint16(0), trainers[0]
            )
        );
        ev.slashUnrevealed(ID, 0, 0, trainers[0]);
        assertEq(reg.trainerMetrics(ID, trainers[0]).slashed, 0, "the trainer that revealed was slashed");
        uint64 until = reg.getRound(ID, 0).finalizedAt + CHALLENGE_SECONDS;
        vm.warp(until + 1);
        vm.expectRevert(
            abi.encodeWithSelector(ITrainingRegistryRounds.Registry__ChallengeWindowClosed.selector, ID, uint32(0), until)
        );
        ev.slashUnrevealed(ID, 0, 0, trainers[2]);
    }

    /// The honest side: a rewind that reopens a round cuts its opening's reveal phase, so a
    /// commitment of the cut opening is never slashed, neither before the round is committed
    /// again nor after (the committed opening is the new one).
    function test_commitNeverReveal_cutOpeningIsNotSlashed() public {
        uint16 m = 4;
        uint16 f = 2; // trainers gain 3000 credits a round (_challengeSlot)
        address liar = _openRoot(m, f, 3, 0);
        ITrainingRegistryRounds.RootCommit memory c0 = _fullCommit(0, m, f, 0);
        _commitBy(liar, c0);
        ITrainingRegistryRounds.RoundClaim memory a0 = _challengeSlot(0, c0, c0);

        // round 1: trainer 2 commits; before its reveal, round 0 is proven wrong and reopened
        _commitWork(2, keccak256("cut by the rewind"));
        vm.warp(block.timestamp + CHALLENGE_SECONDS + 1);
        assertTrue(block.timestamp <= reg.getRun(ID).roundDeadline, "the rewind lands inside round 1");
        rf.expireSlot(a0, 0, 0);
        assertEq(reg.getRun(ID).currentRound, 0, "round 0 open again");
        vm.expectRevert(
            abi.encodeWithSelector(ITrainingRegistryRounds.Registry__RoundNotCommitted.selector, ID, uint32(1))
        );
        ev.slashUnrevealed(ID, 1, 0, trainers[2]);

        // rounds 0 and 1 are committed again (a new opening of round 1): still nothing to slash
        address next = reg.getRun(ID).syncer;
        if (next == address(0)) {
            vm.warp(block.timestamp + SYNCER_TIMEOUT + 1);
            next = _elect(ID);
        }
        _commitBy(next, c0);
        vm.warp(reg.getRun(ID).roundDeadline + 1);
        _commitBy(next, _fullCommit(1, m, f, 3000));
        vm.expectRevert(
            abi.encodeWithSelector(
                ITrainingRegistryTypes.Registry__NotCommitted.selector, ID, uint32(1), uint16(0), trainers[2]
            )
        );
        ev.slashUnrevealed(ID, 1, 0, trainers[2]);
        assertEq(
            reg.trainerMetrics(ID, trainers[2]).slashed, 0, "a commitment whose reveal phase the rewind cut was slashed"
        );
    }

    // ------------------------------------------------------------ a proof's bounty copied from the mempool

    /// @dev The claim of round 0 committed as `c` (3 trainers, one 64-value fragment) with trainer
    /// 0 left out: trainers 1 and 2 credited 64 each.
    function _claimWithoutTrainer0(ITrainingRegistryRounds.RootCommit memory c)
        internal
        pure
        returns (ITrainingRegistryRounds.RoundClaim memory a)
    {
        a.taskId = ID;
        a.round = 0;
        a.current.fragmentsRoot = c.fragmentsRoot;
        uint256[] memory credits = new uint256[](3);
        credits[1] = 64;
        credits[2] = 64;
        (a.current.creditsRoot,) = CreditsTree.rootAndPath(CreditsTree.leaves(credits), 0);
        a.current.totalCredits = 128;
        a.current.bitmapsHash = keccak256(abi.encodePacked(c.acceptedBitmaps));
    }


    address internal constant COPIER = address(0xc0b1);

    /// @dev The honest side of attack 5 up to the proof: an available forced payload left out of
    /// round 0; returns the convicted syncer and the proveOmission calldata that proves it.
    function _omissionToProve() internal returns (address elected, bytes memory proof) {
        ITrainingRegistryTypes.SignedPayload memory sp;
        (elected, sp) = _forcedWhole();
        _fund(WATCHER, SYNCER_BOND);
        vm.prank(WATCHER);
        ev.challengeAvailability(ID, 0, 0, trainers[0], sp, WHOLE);
        vm.prank(trainers[0]);
        ev.answerAvailability(ID, 0, 0, trainers[0], _whole(4));
        vm.warp(reg.getRun(ID).roundDeadline + 1);
        ITrainingRegistryRounds.RootCommit memory c = _fullCommit(0, 3, 1, 0);
        c.acceptedBitmaps[0] = 0;
        vm.prank(elected);
        rf.commitRound(c);
        ITrainingRegistryRounds.RoundClaim memory a = _claimWithoutTrainer0(c);
        proof = abi.encodeCall(rf.proveOmission, (a, c.acceptedBitmaps, 0, 0));
    }

    /// @dev `who` sends `proof` (raw calldata) to the registry; returns whether it went through.
    function _sendProof(address who, bytes memory proof) internal returns (bool ok) {
        vm.prank(who);
        (ok,) = address(reg).call(proof);
    }

    /// Before: a proof paid its bounty to whoever sent it, so a bot that copied a pending proof
    /// from the mempool with a higher fee took the bounty (10 % of the syncer's 50 TNZO bond) and
    /// the prover's own transaction reverted. Now the bounty goes only to a sender that committed
    /// to the proof's calldata (`commitProof`) in an earlier block: the copy still convicts (the
    /// network loses nothing) but pays its copier nothing and burns the bounty; a commitment in
    /// the proof's own block does not count; the committed prover, mined first, is paid.
    function test_bountyCopiedFromMempool_paysTheCopierNothing() public {
        (address elected, bytes memory proof) = _omissionToProve();
        uint256 snap = vm.snapshotState();
        bytes32 mine = keccak256(abi.encode(keccak256(proof), WATCHER));

        // the copier's transaction is mined first, with the watcher's calldata
        vm.prank(WATCHER);
        rf.commitProof(mine);
        vm.roll(block.number + 1);
        vm.prank(COPIER);
        rf.commitProof(mine); // copying the commitment too names the watcher, not the copier
        uint256 burned = reg.burned();
        assertTrue(_sendProof(COPIER, proof), "the copy convicts");
        (uint256 stake,,,) = reg.syncerInfo(elected);
        assertEq(stake, MIN_SYNCER_STAKE - SYNCER_BOND, "the syncer lost its bond");
        assertEq(reg.withdrawable(COPIER), 0, "the copier took the bounty");
        assertEq(reg.burned() - burned, SYNCER_BOND, "the bond, bounty included, burned");
        assertTrue(!_sendProof(WATCHER, proof), "proven once");

        // a commitment in the proof's own block does not count
        vm.revertToState(snap);
        uint256 before = reg.withdrawable(WATCHER);
        vm.prank(WATCHER);
        rf.commitProof(mine);
        assertTrue(_sendProof(WATCHER, proof), "the proof convicts");
        assertEq(reg.withdrawable(WATCHER), before, "paid for a commitment of the same block");
        assertEq(reg.burned() - burned, SYNCER_BOND, "the bond, bounty included, burned");

        // the committed prover, mined first, is paid
        vm.revertToState(snap);
        vm.prank(WATCHER);
        rf.commitProof(mine);
        vm.roll(block.number + 1);
        assertTrue(_sendProof(WATCHER, proof), "the proof convicts");
        assertEq(reg.withdrawable(WATCHER) - before, SYNCER_BOND / 10, "the committed prover's bounty");
        assertEq(reg.burned() - burned, SYNCER_BOND - SYNCER_BOND / 10, "the rest burned");
    }

    // ------------------------------------------------------------ attack 6: norm screen sybils

    /// @dev Round 0 of a 4-trainer, one-fragment (16 values) root-flow run, every trainer
    /// accepted with a signed sum of squares of 1.0; returns the syncer, the commit and the norm
    /// reference that opens its accepted set.
    function _referenceRound()
        internal
        returns (
            address elected,
            ITrainingRegistryRounds.RootCommit memory c0,
            ITrainingRegistryEvidence.NormReference memory ref
        )
    {
        elected = _openOneChunk(4, 3);
        bytes32 base = reg.getRun(ID).weightsRoot;
        ref.entries = new ITrainingRegistryEvidence.ReferenceEntry[](4);
        bytes32[] memory slots = new bytes32[](4);
        for (uint16 i = 0; i < 4; ++i) {
            ITrainingRegistryTypes.SignedPayload memory sp =
                _signedOn(i, ID, 0, 0, keccak256(abi.encode("work", i)), 0x3F800000, base);
            bytes32 sh = RoundProofs.structHash(ID, 0, 0, base, sp.payloadRoot, sp.payloadSumsq, sp.cid, sp.payloadHash);
            slots[i] = RoundProofs.slotLeaf(i, sh);
            ref.entries[i] = ITrainingRegistryEvidence.ReferenceEntry({
                trainerIndex: i,
                baseRoot: base,
                payloadRoot: sp.payloadRoot,
                payloadSumsq: sp.payloadSumsq,
                cidHash: keccak256(bytes(sp.cid)),
                payloadHash: sp.payloadHash,
                slotPath: new bytes32[](2),
                signature: sp.signature
            });
        }
        // the accepted-set tree over 4 slots: each slot's path is its sibling, then the other pair
        bytes32 l = keccak256(abi.encodePacked(slots[0], slots[1]));
        bytes32 r = keccak256(abi.encodePacked(slots[2], slots[3]));
        for (uint256 i = 0; i < 4; ++i) {
            ref.entries[i].slotPath[0] = slots[i ^ 1];
            ref.entries[i].slotPath[1] = i < 2 ? r : l;
        }
        ref.leaf = _leaf(_chunk(0x3F800000), false);
        ref.leaf.acceptedRoot = keccak256(abi.encodePacked(l, r));
        ref.leaf.acceptedCount = 4;
        ref.leafPath = new bytes32[](0);
        c0 = _leafCommit(0, 4, ref.leaf, 0);
        _commitBy(elected, c0);
        ref.previous = _roots(c0, 16);
    }

    /// @dev Trainer i commits to a forced submission of the open round's fragment 0 with sum of
    /// squares `sumsq` (commit now; reveal with _reveal after the commit phase).
    function _forceSum(uint256 i, uint32 sumsq) internal returns (ITrainingRegistryTypes.SignedPayload memory sp) {
        sp = _signed(i, ID, reg.getRun(ID).currentRound, 0, keccak256(abi.encode("forced", i)), sumsq);
        _commitForced(ID, i, 0, sp);
    }

    /// Before: the NormOutlier screen's median was over the round's on-chain (forced) submissions
    /// only, so two sybils forcing all-zero payloads beside a censored honest trainer's forced one
    /// made it the "outlier" (median 0): slashed 5 % a round, no credit. Now: in the root flow the
    /// screen's reference is the previous committed round's accepted sums (signed by their
    /// trainers, opened from its fragment leaf), which the round's forcing sybils cannot move; the
    /// old proof is refused, the honest trainer's payload is within the screen, and a real outlier
    /// is still proven.
    function test_normScreenSybils_fails() public {
        (,, ITrainingRegistryEvidence.NormReference memory ref) = _referenceRound();
        // round 1: the honest trainer 0 (censored) and the sybils 1, 2 force; 3 forces a real outlier
        ITrainingRegistryTypes.SignedPayload memory honest = _forceSum(0, 0x3F800000); // 1.0
        ITrainingRegistryTypes.SignedPayload memory sybil1 = _forceSum(1, 0); // all zero
        ITrainingRegistryTypes.SignedPayload memory sybil2 = _forceSum(2, 0);
        ITrainingRegistryTypes.SignedPayload memory outlier = _forceSum(3, 0x447A0000); // 1000.0 > 100 * 1.0
        (uint64 closes,) = rf.commitPhase(ID);
        vm.warp(closes + 1);
        _reveal(ID, 1, 0, honest);
        _reveal(ID, 1, 0, sybil1);
        _reveal(ID, 1, 0, sybil2);
        _reveal(ID, 1, 0, outlier);

        // the sybils' proof, the median of the round's own sums (0) making 1.0 an outlier, no longer
        // exists: proveInvalid proves no norm outlier
        ITrainingRegistryTypes.ChunkOpening memory none;
        vm.prank(trainers[1]);
        vm.expectRevert(
            abi.encodeWithSelector(
                ITrainingRegistryTypes.Registry__UnknownReason.selector, uint8(ITrainingRegistryTypes.SlashReason.NormOutlier)
            )
        );
        ev.proveInvalid(ID, 1, 0, trainers[0], uint8(ITrainingRegistryTypes.SlashReason.NormOutlier), honest, none);
        // against the previous round's accepted sums (median 1.0) the honest payload is within the screen
        vm.prank(trainers[1]);
        vm.expectRevert(
            abi.encodeWithSelector(
                ITrainingRegistryTypes.Registry__NotProven.selector,
                uint8(ITrainingRegistryTypes.SlashReason.NormOutlier)
            )
        );
        ev.proveNormOutlier(ID, 1, 0, trainers[0], honest, ref);
        assertEq(reg.trainerMetrics(ID, trainers[0]).slashed, 0, "the censored honest trainer was slashed");

        // a real outlier is proven against the same reference
        uint256 g = gasleft();
        ev.proveNormOutlier(ID, 1, 0, trainers[3], outlier, ref);
        emit log_named_uint("proveNormOutlier gas, reference of 4 entries", g - gasleft());
        assertEq(reg.trainerMetrics(ID, trainers[3]).slashed, MIN_STAKE / 20, "the outlier is slashed 5 %");
        // a reference that is not the previous round's accepted set is refused
        ref.entries[1].payloadSumsq = 0;
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__IncompleteSubmissionSet.selector, 4, 4));
        ev.proveNormOutlier(ID, 1, 0, trainers[0], honest, ref);
    }
}
