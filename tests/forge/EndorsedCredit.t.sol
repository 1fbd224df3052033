// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {ITrainingRegistryTypes} from "../../contracts/interfaces/ITrainingRegistryTypes.sol";
import {ITrainingRegistryRounds} from "../../contracts/interfaces/ITrainingRegistryRounds.sol";
import {RegistryBase} from "./RegistryBase.sol";

/// @notice Endorsed credit (issue #26, PROTOCOL.md §5 "Endorsed credit"): the registry must accept a
/// live forced submission, so forcing once paid whatever was forced. The syncer now marks the
/// accepted submissions it found no work in (unendorsedBitmaps); their credit is kept apart and paid
/// only up to the trainer's endorsed credit, the rest swept to the sponsor. The attack first (sybils
/// fill an Open run and force all-zero payloads), then what the defence must not do to the honest:
/// a trainer the syncer leaves out in some rounds is still paid in full, and credit the syncer holds
/// back goes to nobody it could collude with.
contract EndorsedCreditTest is RegistryBase {
    bytes32 internal constant ID = keccak256("endorsed-credit");
    uint256 internal constant POOL = 1_000e18;
    uint16 internal constant M = 4;
    uint16 internal constant F = 2; // fragment sizes 1000, 2000
    uint256 internal constant ALL = 3; // both fragments
    uint256 internal constant ROUND_CREDITS = 3000; // one trainer's credits for both fragments

    function setUp() public {
        _deploy();
        _registerSyncer(syncer, MIN_SYNCER_STAKE);
    }

    /// @dev M sybils (trainers 8..11) take every slot of an Open run the moment it is posted.
    function _sybilFill(uint32 rounds) internal {
        _post(_params(ID, M, 3, F, rounds, POOL));
        for (uint256 i = 0; i < M; ++i) {
            _enroll(ID, 8 + i, MIN_STAKE);
        }
        _elect(ID);
    }

    /// @dev Every sybil forces an all-zero payload (sum of squares 0) on every fragment of the open
    /// round: commits, waits out the commit phase, reveals.
    function _forceZeros() internal {
        uint32 round = reg.getRun(ID).currentRound;
        ITrainingRegistryTypes.SignedPayload[] memory sp = new ITrainingRegistryTypes.SignedPayload[](M * F);
        for (uint256 i = 0; i < M; ++i) {
            for (uint16 f = 0; f < F; ++f) {
                sp[i * F + f] = _signed(8 + i, ID, round, f, keccak256("zeros"), 0);
                _commitForced(ID, 8 + i, f, sp[i * F + f]);
            }
        }
        _toRevealPhase(ID);
        for (uint256 k = 0; k < sp.length; ++k) {
            // forge-lint: disable-next-line(unsafe-typecast) -- k % F < F, a uint16
            _reveal(ID, round, uint16(k % F), sp[k]);
        }
    }

    /// @dev The syncer commits `round` accepting `bitmaps`, `unendorsed` of them without its
    /// endorsement, on top of `previous` credit words; returns the credit words after it.
    function _commit(uint32 round, uint256[] memory bitmaps, uint256[] memory unendorsed, uint256[] memory previous)
        internal
        returns (uint256[] memory next)
    {
        ITrainingRegistryRounds.RootCommit memory c = _rootCommit(ID, round, F, bitmaps, previous);
        c.unendorsedBitmaps = unendorsed;
        _commitAs(c);
        next = new uint256[](previous.length);
        for (uint256 i = 0; i < previous.length; ++i) {
            uint256 u = unendorsed.length == 0 ? 0 : unendorsed[i];
            next[i] = previous[i] + _size(bitmaps[i] & ~u) + (_size(u) << 128);
        }
    }

    /// @dev Credits of a bitmap over the fixture's fragment sizes (1000, 2000).
    function _size(uint256 bits) internal pure returns (uint256) {
        return (bits & 1) * 1000 + ((bits >> 1) & 1) * 2000;
    }

    /// @dev Seals, claims every trainer's credits and returns what each was paid.
    function _sealClaimAll(uint256[] memory credits) internal returns (uint256[] memory paid) {
        vm.warp(block.timestamp + CHALLENGE_SECONDS + 1);
        reg.sealRootRun(ID);
        address[] memory list = reg.trainersOf(ID);
        paid = new uint256[](credits.length);
        for (uint16 i = 0; i < credits.length; ++i) {
            uint256 before = reg.withdrawable(list[i]);
            reg.claim(ID, i, credits[i], _proof(credits, i));
            paid[i] = reg.withdrawable(list[i]) - before;
        }
    }

    /// The attack as it stood: a syncer that endorses everything it must accept (no unendorsed
    /// bitmaps, the commit of before) pays the sybils' forced zeros the whole pool.
    function test_sybilFill_takesThePool_whenTheSyncerEndorsesForcedZeros() public {
        _sybilFill(2);
        uint256[] memory credits = _fill(M, 0);
        for (uint32 r = 0; r < 2; ++r) {
            _forceZeros();
            credits = _commit(r, _fill(M, ALL), new uint256[](0), credits);
        }
        uint256[] memory paid = _sealClaimAll(credits);
        uint256 total;
        for (uint256 i = 0; i < M; ++i) {
            total += paid[i];
        }
        assertTrue(total > (POOL * 999) / 1000, "the sybils take the pool");
    }

    /// The defence: the syncer accepts the forced zeros (it must: leaving a live forced submission
    /// out is provable, proveOmission) but does not endorse them. Unendorsed credit is paid only up
    /// to endorsed credit, so the sybils are paid nothing and the sponsor sweeps the whole pool.
    function test_sybilFill_openRun_forcedZerosUnendorsed_paysNothing() public {
        _sybilFill(2);
        uint256[] memory credits = _fill(M, 0);
        for (uint32 r = 0; r < 2; ++r) {
            _forceZeros();
            credits = _commit(r, _fill(M, ALL), _fill(M, ALL), credits);
        }
        assertEq(reg.getRun(ID).totalCredits, 2 * M * ROUND_CREDITS, "credited (both halves count in the total)");
        uint256[] memory paid = _sealClaimAll(credits);
        for (uint256 i = 0; i < M; ++i) {
            assertEq(paid[i], 0, "a sybil's forced zeros pay nothing");
            assertEq(reg.withdrawable(trainers[8 + i]), MIN_STAKE, "its stake back, no more");
        }
        (,,, uint64 deadline) = reg.rootState(ID);
        vm.warp(deadline + 1);
        reg.sweep(ID);
        assertEq(reg.withdrawable(sponsor), POOL, "the sponsor gets its pool back");
    }

    /// Forcing what the syncer accepted anyway, or being left out of some rounds, costs an honest
    /// trainer nothing: trainer 0 is endorsed in round 0 and left out of round 1 (forced in,
    /// unendorsed) and is paid exactly what trainer 1, endorsed in both, is paid.
    function test_trainerLeftOutOfSomeRounds_isPaidInFull() public {
        _post(_params(ID, M, 3, F, 2, POOL));
        for (uint256 i = 0; i < M; ++i) {
            _enroll(ID, i, MIN_STAKE);
        }
        _elect(ID);
        uint256[] memory credits = _commit(0, _fill(M, ALL), new uint256[](0), _fill(M, 0));
        uint256[] memory u = _fill(M, 0);
        u[0] = ALL;
        credits = _commit(1, _fill(M, ALL), u, credits);
        assertEq(credits[0], ROUND_CREDITS + (ROUND_CREDITS << 128), "half endorsed, half not");
        uint256[] memory paid = _sealClaimAll(credits);
        assertEq(paid[0], paid[1], "paid as if endorsed throughout");
        assertEq(paid[0], POOL / M, "a quarter of the pool");
    }

    /// Credit the syncer does not endorse is not shared among the others (the colluders of a
    /// syncer that withholds endorsement gain nothing by it): with trainer 0 wholly unendorsed,
    /// trainers 1..3 are paid their share of the whole total, and trainer 0's share is swept to
    /// the sponsor.
    function test_unpaidCredit_goesToTheSponsor_notToTheOtherTrainers() public {
        _post(_params(ID, M, 3, F, 1, POOL));
        for (uint256 i = 0; i < M; ++i) {
            _enroll(ID, i, MIN_STAKE);
        }
        _elect(ID);
        uint256[] memory u = _fill(M, 0);
        u[0] = ALL;
        uint256[] memory credits = _commit(0, _fill(M, ALL), u, _fill(M, 0));
        uint256[] memory paid = _sealClaimAll(credits);
        assertEq(paid[0], 0, "no endorsed credit: nothing paid");
        for (uint256 i = 1; i < M; ++i) {
            assertEq(paid[i], POOL / M, "each other trainer: its share of the whole total, no more");
        }
        (,,, uint64 deadline) = reg.rootState(ID);
        vm.warp(deadline + 1);
        reg.sweep(ID);
        assertEq(reg.withdrawable(sponsor), POOL / M, "the unpaid share back to the sponsor");
    }

    /// Any pattern of accepted and unendorsed submissions over three rounds (fuzzed): each claim
    /// pays floor(pool x paid / total), paid = e + min(u, e) of the trainer's credits word; a
    /// trainer with no endorsed credit gets nothing; the claims and the sweep pay out the pool
    /// exactly, the sponsor getting what no claim was owed.
    function testFuzz_claimsPayTheEndorsedShare_andThePoolIsPaidOutExactly(uint256 seed) public {
        _post(_params(ID, M, 1, F, 3, POOL));
        for (uint256 i = 0; i < M; ++i) {
            _enroll(ID, i, MIN_STAKE);
        }
        _elect(ID);
        uint256[] memory credits = _fill(M, 0);
        for (uint32 r = 0; r < 3; ++r) {
            uint256[] memory bitmaps = new uint256[](M);
            uint256[] memory u = new uint256[](M);
            for (uint256 i = 0; i < M; ++i) {
                uint256 x = uint256(keccak256(abi.encode(seed, r, i)));
                bitmaps[i] = i == 0 ? ALL : x & ALL; // trainer 0 on both fragments: the quorum K = 1
                u[i] = bitmaps[i] & (x >> 8);
            }
            credits = _commit(r, bitmaps, u, credits);
        }
        uint256 total = reg.getRun(ID).totalCredits;
        uint256[] memory paid = _sealClaimAll(credits);
        uint256 sum;
        for (uint256 i = 0; i < M; ++i) {
            uint256 e = credits[i] & type(uint128).max;
            uint256 owed = e + ((credits[i] >> 128) < e ? (credits[i] >> 128) : e);
            assertEq(paid[i], (POOL * owed) / total, "a claim pays the endorsed share");
            if (e == 0) assertEq(paid[i], 0, "nothing without endorsed credit");
            sum += paid[i];
        }
        (,,, uint64 deadline) = reg.rootState(ID);
        vm.warp(deadline + 1);
        reg.sweep(ID);
        assertEq(reg.withdrawable(sponsor) + sum, POOL, "claims and sweep pay out the pool exactly");
    }

    /// The unendorsed bitmaps must lie within the accepted ones (credit for a submission not
    /// accepted would be credit for nothing) and number none or one per enrolled trainer.
    function test_unendorsedBitmaps_checked() public {
        _post(_params(ID, M, 3, F, 1, POOL));
        for (uint256 i = 0; i < M; ++i) {
            _enroll(ID, i, MIN_STAKE);
        }
        _elect(ID);
        _toRevealPhase(ID);
        uint256[] memory bitmaps = _fill(M, ALL);
        bitmaps[2] = 1;
        ITrainingRegistryRounds.RootCommit memory c = _rootCommit(ID, 0, F, bitmaps, _fill(M, 0));
        c.unendorsedBitmaps = _fill(M, 0);
        c.unendorsedBitmaps[2] = 2; // fragment 1 of trainer 2: not accepted
        vm.prank(syncer);
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryRounds.Registry__BadBitmap.selector, uint16(2), 2));
        reg.commitRound(c);
        c.unendorsedBitmaps = _fill(M - 1, 0);
        vm.prank(syncer);
        vm.expectRevert(abi.encodeWithSelector(ITrainingRegistryRounds.Registry__UnendorsedLength.selector, M - 1, M));
        reg.commitRound(c);
        c.unendorsedBitmaps = _fill(M, 0);
        c.unendorsedBitmaps[2] = 1;
        vm.prank(syncer);
        reg.commitRound(c);
        assertEq(reg.getRun(ID).totalCredits, 3 * ROUND_CREDITS + 1000, "every accepted bit counted once");
    }
}
