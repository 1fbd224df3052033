// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {ITrainingRegistryTypes} from "../../contracts/interfaces/ITrainingRegistryTypes.sol";
import {RegistryBase} from "./RegistryBase.sol";
import {ITrainingRegistry} from "../../contracts/interfaces/ITrainingRegistry.sol";
import {ITrainingRegistryFull} from "../../contracts/interfaces/ITrainingRegistryFull.sol";
import {ITrainingRegistryRounds} from "../../contracts/interfaces/ITrainingRegistryRounds.sol";
import {ChunkMerkle} from "../../contracts/lib/ChunkMerkle.sol";

/// @notice No slash on anyone's word (PROTOCOL.md §4, issue "Protocol v2", attacks 4 and 5):
/// invalid forced payloads are proven by opening committed chunks, unavailable ones by an
/// unanswered challenge; a wrong report slashes nobody. (Norm outliers and a live forced
/// submission left out: ProtocolV3Attacks.t.sol, proveNormOutlier and proveOmission.)
contract EvidenceTest is RegistryBase {
    bytes32 internal constant ID = keccak256("evidence");
    uint32 internal constant ONE = 0x3F800000; // 1.0
    uint32 internal constant NAN = 0x7FC00000;
    address internal prover = address(0x9407);

    /// @dev A payload of 20 values (two chunks): its chunks and commitment.
    struct Payload {
        bytes c0;
        bytes c1;
        bytes32 h0;
        uint32 s0;
        bytes32 h1;
        uint32 s1;
        bytes32 root;
        uint32 sumsq;
    }

    function setUp() public {
        _deploy();
        _registerSyncer(syncer, MIN_SYNCER_STAKE);
    }

    // ------------------------------------------------------------ helpers

    /// @dev 16 big-endian binary32 values: `count` of them `v`, the rest +0.
    function _chunk(uint256 count, uint32 v) internal pure returns (bytes memory c) {
        c = new bytes(64);
        for (uint256 j = 0; j < count; ++j) {
            for (uint256 b = 0; b < 4; ++b) {
                c[4 * j + b] = bytes1(uint8(v >> (24 - 8 * b)));
            }
        }
    }

    /// @dev Values 0..15 = `a`, values 16..19 = `b`, padding after 20 = `pad` (bad when non-zero).
    function _payload(uint32 a, uint32 b, uint32 pad) internal pure returns (Payload memory p) {
        p.c0 = _chunk(16, a);
        p.c1 = _chunk(4, b);
        if (pad != 0) {
            for (uint256 bb = 0; bb < 4; ++bb) {
                p.c1[4 * 7 + bb] = bytes1(uint8(pad >> (24 - 8 * bb)));
            }
        }
        (p.h0, p.s0) = ChunkMerkle.leaf(p.c0);
        (p.h1, p.s1) = ChunkMerkle.leaf(p.c1);
        (p.root, p.sumsq) = ChunkMerkle.node(p.h0, p.s0, p.h1, p.s1);
    }

    function _open(Payload memory p, uint32 chunkIndex) internal pure returns (ITrainingRegistryTypes.ChunkOpening memory o) {
        o.chunkIndex = chunkIndex;
        o.chunk = chunkIndex == 0 ? p.c0 : p.c1;
        o.siblingH = new bytes32[](1);
        o.siblingS = new uint32[](1);
        o.siblingH[0] = chunkIndex == 0 ? p.h1 : p.h0;
        o.siblingS[0] = chunkIndex == 0 ? p.s1 : p.s0;
    }

    /// @dev M trainers, K = k, one fragment of 20 values, `rounds` rounds.
    function _run(uint16 m, uint16 k, uint32 rounds) internal {
        ITrainingRegistryTypes.TaskParams memory p = _params(ID, m, k, 1, rounds, 100e18);
        p.fragmentSizes[0] = 20;
        _post(p);
        for (uint256 i = 0; i < m; ++i) {
            _enroll(ID, i, MIN_STAKE);
        }
        _elect(ID);
    }

    /// @dev The forced submissions `_send` committed and `_revealSent` has not revealed yet.
    ITrainingRegistryTypes.SignedPayload[] internal _sent;

    /// @dev Trainer i commits to forcing `p` in the open round (the commit phase must be open);
    /// `_revealSent` reveals it with the others after the phase.
    function _send(uint256 i, Payload memory p) internal returns (ITrainingRegistryTypes.SignedPayload memory sp) {
        sp = _signed(i, ID, reg.getRun(ID).currentRound, 0, p.root, p.sumsq);
        _commitForced(ID, i, 0, sp);
        _sent.push(sp);
    }

    /// @dev Waits out the commit phase and reveals every forced submission `_send` committed.
    function _revealSent() internal {
        _toRevealPhase(ID);
        uint32 round = reg.getRun(ID).currentRound;
        for (uint256 k = 0; k < _sent.length; ++k) {
            _reveal(ID, round, 0, _sent[k]);
        }
        delete _sent;
    }

    /// @dev Commits round 0 of the one-fragment run (m trainers, nobody credited before) with
    /// trainer i accepted for each bit i of `bits`, after the commit phase; returns its bitmaps
    /// and the claim a proof about it opens (round 0: no previous roots).
    function _commitRound0(uint256 m, uint256 bits)
        internal
        returns (ITrainingRegistryRounds.RoundClaim memory a, uint256[] memory acc)
    {
        acc = new uint256[](m);
        uint256[] memory credits = new uint256[](m);
        uint256 total;
        uint256 size = reg.getRun(ID).fragmentSizes[0];
        for (uint256 i = 0; i < m; ++i) {
            acc[i] = (bits >> i) & 1;
            credits[i] = acc[i] * size;
            total += credits[i];
        }
        ITrainingRegistryRounds.RootCommit memory c = _rootCommit(ID, 0, 1, acc, new uint256[](m));
        _commitAs(c);
        a.taskId = ID;
        a.round = 0;
        a.current = ITrainingRegistryRounds.RoundRoots({
            fragmentsRoot: c.fragmentsRoot,
            creditsRoot: _creditsRoot(credits),
            totalCredits: total,
            bitmapsHash: keccak256(abi.encodePacked(acc))
        });
    }

    // ------------------------------------------------------------ non-finite, padding

    function test_nonFinite_provenByOpeningOneChunk_bountyAndBurn() public {
        _run(2, 1, 1);
        Payload memory bad = _payload(ONE, NAN, 0);
        ITrainingRegistryTypes.SignedPayload memory sp = _send(1, bad);
        _send(0, _payload(ONE, ONE, 0));
        _revealSent();

        // the sound chunk proves nothing
        vm.prank(prover);
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__NotProven.selector, uint8(3)));
        ev.proveInvalid(ID, 0, 0, trainers[1], 3, sp, _open(bad, 0));

        // the prover commits to its proof a block before it sends it (the bounty's condition)
        bytes memory proof = abi.encodeCall(ev.proveInvalid, (ID, 0, 0, trainers[1], 3, sp, _open(bad, 1)));
        vm.prank(prover);
        ITrainingRegistryFull(address(reg)).commitProof(keccak256(abi.encode(keccak256(proof), prover)));
        vm.roll(block.number + 1);
        vm.prank(prover);
        ev.proveInvalid(ID, 0, 0, trainers[1], 3, sp, _open(bad, 1));
        uint256 slash = MIN_STAKE / 20;
        assertEq(reg.trainerMetrics(ID, trainers[1]).slashed, slash, "5 % slashed");
        assertEq(reg.withdrawable(prover), slash / 10, "10 % bounty to the prover");
        assertEq(reg.burned(), slash - slash / 10, "the rest burned");
        (, uint256 rej) = reg.submissionsOf(ID, 0, trainers[1]);
        assertEq(rej, 1, "rejected");

        // proven once: a second proof finds no live submission
        vm.prank(prover);
        vm.expectRevert(
            abi.encodeWithSelector(ITrainingRegistryTypes.Registry__NoSuchSubmission.selector, ID, 0, uint16(0), trainers[1])
        );
        ev.proveInvalid(ID, 0, 0, trainers[1], 3, sp, _open(bad, 1));
    }

    function test_badPadding_proven_soundPaddingNot() public {
        _run(2, 1, 1);
        Payload memory padded = _payload(ONE, ONE, ONE);
        ITrainingRegistryTypes.SignedPayload memory sp = _send(1, padded);
        Payload memory fine = _payload(ONE, ONE, 0);
        ITrainingRegistryTypes.SignedPayload memory sp0 = _send(0, fine);
        _revealSent();
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__NotProven.selector, uint8(2)));
        ev.proveInvalid(ID, 0, 0, trainers[0], 2, sp0, _open(fine, 1));
        ev.proveInvalid(ID, 0, 0, trainers[1], 2, sp, _open(padded, 1));
        assertEq(reg.trainerMetrics(ID, trainers[1]).slashed, MIN_STAKE / 20, "slashed for bad padding");
    }

    function test_forgedOpeningOrSigner_rejected() public {
        _run(2, 1, 1);
        Payload memory bad = _payload(ONE, NAN, 0);
        ITrainingRegistryTypes.SignedPayload memory sp = _send(1, bad);
        _revealSent();
        // a chunk that is not in the committed tree
        ITrainingRegistryTypes.ChunkOpening memory o = _open(bad, 1);
        o.siblingS[0] = ONE;
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__BadOpening.selector, uint32(1)));
        ev.proveInvalid(ID, 0, 0, trainers[1], 3, sp, o);
        // a NaN payload the trainer never signed (signed by trainer 0) cannot be pinned on trainer 1
        ITrainingRegistryTypes.SignedPayload memory forged = _signed(0, ID, 0, 0, bad.root, bad.sumsq);
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__NotSignedBy.selector, trainers[1]));
        ev.proveInvalid(ID, 0, 0, trainers[1], 3, forged, _open(bad, 1));
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__UnknownReason.selector, uint8(0)));
        ev.proveInvalid(ID, 0, 0, trainers[1], 0, sp, _open(bad, 1));
    }

    // ------------------------------------------------------------ availability

    function test_availability_unanswered_slashedAfterWindow() public {
        _run(2, 1, 1);
        _send(0, _payload(ONE, ONE, 0));
        ITrainingRegistryTypes.SignedPayload memory sp = _send(1, _payload(ONE, ONE, 0));
        _revealSent();
        uint256 bond = ev.challengeBond(ID);
        assertEq(bond, SYNCER_BOND / 10, "bond = 10 % of the syncer bond");
        _fund(syncer, bond);
        vm.prank(syncer);
        ev.challengeAvailability(ID, 0, 0, trainers[1], sp, 1);
        // the commit (the commit phase is over) waits for the challenge to settle
        vm.prank(syncer);
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__ChallengesPending.selector, ID, uint16(1)));
        reg.commitRound(_rootCommit(ID, 0, 1, _fill(2, 1), _fill(2, 0)));
        uint64 deadline = ev.availabilityChallenge(ID, 0, 0, trainers[1]).deadline;
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__ChallengeDeadline.selector, deadline));
        ev.expireAvailability(ID, 0, 0, trainers[1]);
        vm.warp(deadline + 1);
        ev.expireAvailability(ID, 0, 0, trainers[1]);
        uint256 slash = MIN_STAKE / 20;
        assertEq(reg.trainerMetrics(ID, trainers[1]).slashed, slash, "slashed");
        assertEq(reg.withdrawable(syncer), bond + slash / 10, "bond back + bounty");
        assertEq(ev.challengeBondsHeld(), 0, "no bond held");
        (, uint256 rejected) = reg.submissionsOf(ID, 0, trainers[1]);
        assertEq(rejected, 1, "the unanswered submission lapsed");
        // no longer live: leaving it out is no omission
        (ITrainingRegistryRounds.RoundClaim memory a, uint256[] memory acc) = _commitRound0(2, 1);
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryRounds.Registry__NoMismatch.selector, 0, 1));
        reg.proveOmission(a, acc, 0, 1);
        vm.warp(block.timestamp + CHALLENGE_SECONDS + 1);
        reg.sealRootRun(ID);
    }

    /// @dev An answered challenge keeps the submission live: the syncer must accept it, and a
    /// round that leaves it out is convicted by proveOmission (the bond, the rewind).
    function test_availability_answered_bondToTrainer_mustBeAccepted() public {
        _run(2, 1, 1);
        _send(0, _payload(ONE, ONE, 0));
        Payload memory p1 = _payload(ONE, ONE, 0);
        ITrainingRegistryTypes.SignedPayload memory sp = _send(1, p1);
        _revealSent();
        uint256 bond = ev.challengeBond(ID);
        _fund(syncer, bond);
        vm.prank(syncer);
        ev.challengeAvailability(ID, 0, 0, trainers[1], sp, 0);
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__BadOpening.selector, uint32(1)));
        ev.answerAvailability(ID, 0, 0, trainers[1], _open(p1, 1)); // not the challenged chunk
        ev.answerAvailability(ID, 0, 0, trainers[1], _open(p1, 0));
        assertEq(reg.withdrawable(trainers[1]), bond, "the bond compensates the trainer");
        assertEq(reg.trainerMetrics(ID, trainers[1]).slashed, 0, "not slashed");
        (uint256 submitted, uint256 rejected) = reg.submissionsOf(ID, 0, trainers[1]);
        assertEq(submitted, 1, "still live");
        assertEq(rejected, 0, "not rejected");
        (ITrainingRegistryRounds.RoundClaim memory a, uint256[] memory acc) = _commitRound0(2, 1);
        reg.proveOmission(a, acc, 0, 1);
        (uint256 stake,,,) = reg.syncerInfo(syncer);
        assertEq(stake, MIN_SYNCER_STAKE - SYNCER_BOND, "the syncer that left it out lost its bond");
        ITrainingRegistryTypes.RunView memory v = reg.getRun(ID);
        assertTrue(v.status == ITrainingRegistryTypes.RunStatus.Training, "the round is discarded");
        assertEq(v.currentRound, 0, "round 0 trains again");
        assertEq(v.totalCredits, 0, "its credits are gone");
    }

    // ------------------------------------------------------------ attacks 4 and 5

    /// Attack 4 (malicious syncer, the parts closed by evidence): it cannot slash honest
    /// trainers without proof, and committing early on its sybils' quorum costs the honest
    /// trainers nothing but those rounds' credit (nobody counts misses or evicts in the one flow).
    function test_attack4_maliciousSyncer_cannotSlashOmitOrEvict() public {
        _run(4, 2, 3); // trainers 0, 1 are the syncer's sybils
        for (uint32 r = 0; r < 3; ++r) {
            _fullRound(ID, r, 2, 1); // early, on the sybils' quorum: honest trainers 2, 3 had time left
        }
        for (uint256 i = 2; i < 4; ++i) {
            ITrainingRegistryTypes.TrainerMetrics memory m = reg.trainerMetrics(ID, trainers[i]);
            assertEq(m.slashed, 0, "honest trainer not slashed");
        }
        assertEq(reg.getRun(ID).stakeHeld, 4 * MIN_STAKE, "every stake held whole");
    }

    function test_attack4_falseInvalidReport_refuted() public {
        _run(2, 1, 1);
        Payload memory honest = _payload(ONE, ONE, 0);
        ITrainingRegistryTypes.SignedPayload memory sp = _send(1, honest);
        _revealSent();
        for (uint8 reason = 0; reason < 7; ++reason) {
            vm.prank(syncer);
            vm.expectRevert();
            ev.proveInvalid(ID, 0, 0, trainers[1], reason, sp, _open(honest, 1));
        }
        assertEq(reg.trainerMetrics(ID, trainers[1]).slashed, 0, "no slash without evidence");
    }

    /// Attack 5 (sponsor + syncer): "report everything invalid, accept nothing" fails: the report
    /// needs evidence, a live forced submission left out is proven omitted (proveOmission:
    /// ProtocolV3Attacks.t.sol, test_withheldForcedPayload_*), so the pool goes to the trainers,
    /// and no slashed stake could reach the sponsor anyway.
    function test_attack5_collusion_cannotRejectEverything() public {
        _run(2, 1, 1);
        Payload memory p = _payload(ONE, ONE, 0);
        ITrainingRegistryTypes.SignedPayload memory s0 = _send(0, p);
        _send(1, p);
        _revealSent();
        vm.prank(syncer);
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryTypes.Registry__NotProven.selector, uint8(3)));
        ev.proveInvalid(ID, 0, 0, trainers[0], 3, s0, _open(p, 1));
        _fullRound(ID, 0, 2, 1);
        _sealAndClaim(ID);
        assertEq(reg.withdrawable(sponsor), 0, "the sponsor gets nothing back");
        assertEq(reg.withdrawable(trainers[0]), MIN_STAKE + 50e18, "half the pool + stake");
    }
}
