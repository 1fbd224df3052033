// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {TestBase} from "./lib/Cheats.sol";
import {RoundProofs} from "../../contracts/lib/RoundProofs.sol";
import {RoundProofsHarness} from "../../contracts/mocks/RoundProofsHarness.sol";

/// @dev Cheatcodes this file needs beyond tests/forge/lib/Cheats.sol (same cheatcode address).
interface VmJson {
    function parseJsonString(string calldata json, string calldata key) external pure returns (string memory);
    function parseJsonBool(string calldata json, string calldata key) external pure returns (bool);
}

/// @notice RoundProofs (contracts/PROTOCOL.md §6) against tests/vectors/round_commitment_v1.json,
/// written by the Python reference (tenzro_trainer.round_commitment, with real aggregates from
/// tenzro_trainer.canonical): encodings, honest openings (false), planted wrong values (true),
/// every named revert on a tampered proof, and gas at K = 8, n = 2^16.
contract RoundProofsTest is TestBase {
    /// @dev ds-test style log, printed by `forge test -vv`.
    event log_named_uint(string key, uint256 val);

    string internal constant VECTORS = "tests/vectors/round_commitment_v1.json";
    VmJson internal constant vmj = VmJson(address(uint160(uint256(keccak256("hevm cheat code")))));

    // Case indices in the vector file.
    uint256 internal constant INITIAL_K1 = 0; // f1_e1_mean_initial
    uint256 internal constant MEDIAN_K5 = 3; // f4_e8_median_initial (fragment 2: trainers 0, 2, 3, 5, 7)
    uint256 internal constant PLANTED = 4; // f4_e8_mean_planted (K = 8, wrong w at 33, wrong m at 50)
    uint256 internal constant GAS = 5; // gas_k8_n65536

    /// @dev A submission's struct-hash preimage, as the vectors hold it.
    struct Submission {
        bytes32 taskId;
        uint32 round;
        uint16 fragment;
        bytes32 baseRoot;
        bytes32 payloadRoot;
        uint32 payloadSumsq;
        string cid;
        bytes32 payloadHash;
    }

    RoundProofsHarness internal harness;

    function setUp() public {
        harness = new RoundProofsHarness();
    }

    // ------------------------------------------------------------------ shared vectors: encodings

    function test_typeHash() public view {
        string memory json = vm.readFile(VECTORS);
        assertEq(harness.typeHash(), vm.parseJsonBytes32(json, ".outer_gradient_typehash"), "type hash");
        assertEq(
            RoundProofs.OUTER_GRADIENT_TYPEHASH,
            keccak256(bytes(vmj.parseJsonString(json, ".outer_gradient_type"))),
            "type string"
        );
    }

    function test_vectorEncodings() public view {
        string memory json = vm.readFile(VECTORS);
        uint256 count = vm.parseJsonUint(json, ".case_count");
        assertEq(count, 6, "case count");
        for (uint256 k; k < count; ++k) {
            _checkSubmissions(json, k);
            uint256 f = vm.parseJsonUint(json, _key(k, ".fragment_count"));
            assertEq(
                _rootOfLeaves(json, _key(k, ".current_leaves"), f),
                vm.parseJsonBytes32(json, _key(k, ".fragments_root")),
                "root"
            );
            assertEq(
                _rootOfLeaves(json, _key(k, ".previous_leaves"), f),
                vm.parseJsonBytes32(json, _key(k, ".prev_fragments_root")),
                "previous root"
            );
            uint256 enrolled = vm.parseJsonUint(json, _key(k, ".enrolled"));
            assertEq(
                harness.nextPow2(enrolled == 0 ? 1 : enrolled), vm.parseJsonUint(json, _key(k, ".slot_width")), "P"
            );
        }
    }

    /// @dev Each submission's struct hash (from its preimage, CID as a string) and slot leaf.
    function _checkSubmissions(string memory json, uint256 k) internal view {
        uint256 count = vm.parseJsonUint(json, _key(k, ".submission_count"));
        for (uint256 s; s < count; ++s) {
            string memory p = string.concat(_key(k, ".submissions["), vm.toString(s), "]");
            bytes32 sh = _structHashOf(json, p);
            assertEq(sh, vm.parseJsonBytes32(json, string.concat(p, ".struct_hash")), "struct hash");
            uint16 i = uint16(vm.parseJsonUint(json, string.concat(p, ".trainer_index")));
            assertEq(harness.slotLeaf(i, sh), vm.parseJsonBytes32(json, string.concat(p, ".slot_leaf")), "slot leaf");
        }
    }

    /// @dev The struct hash of submission `p` by the harness, from its JSON preimage.
    function _structHashOf(string memory json, string memory p) internal view returns (bytes32) {
        Submission memory x;
        x.taskId = vm.parseJsonBytes32(json, string.concat(p, ".task_id"));
        x.round = uint32(vm.parseJsonUint(json, string.concat(p, ".round")));
        x.fragment = uint16(vm.parseJsonUint(json, string.concat(p, ".fragment")));
        x.baseRoot = vm.parseJsonBytes32(json, string.concat(p, ".base_root"));
        x.payloadRoot = vm.parseJsonBytes32(json, string.concat(p, ".payload_root"));
        x.payloadSumsq = uint32(vm.parseJsonUint(json, string.concat(p, ".payload_sumsq")));
        x.cid = vmj.parseJsonString(json, string.concat(p, ".cid"));
        x.payloadHash = vm.parseJsonBytes32(json, string.concat(p, ".payload_hash"));
        return harness.structHash(
            x.taskId, x.round, x.fragment, x.baseRoot, x.payloadRoot, x.payloadSumsq, x.cid, x.payloadHash
        );
    }

    /// @dev The positional root over a round's fragment leaves, each leaf hashed by the library.
    function _rootOfLeaves(string memory json, string memory prefix, uint256 f) internal view returns (bytes32) {
        bytes32[] memory hashes = new bytes32[](f);
        for (uint256 i; i < f; ++i) {
            string memory p = string.concat(prefix, "[", vm.toString(i), "]");
            RoundProofs.FragmentLeaf memory l = RoundProofs.FragmentLeaf({
                fragment: uint16(vm.parseJsonUint(json, string.concat(p, ".fragment"))),
                acceptedRoot: vm.parseJsonBytes32(json, string.concat(p, ".accepted_root")),
                acceptedCount: uint16(vm.parseJsonUint(json, string.concat(p, ".accepted_count"))),
                weightsRoot: vm.parseJsonBytes32(json, string.concat(p, ".weights_root")),
                weightsSumsq: uint32(vm.parseJsonUint(json, string.concat(p, ".weights_sumsq"))),
                momentumRoot: vm.parseJsonBytes32(json, string.concat(p, ".momentum_root")),
                momentumSumsq: uint32(vm.parseJsonUint(json, string.concat(p, ".momentum_sumsq")))
            });
            hashes[i] = harness.fragmentLeaf(l);
            assertEq(hashes[i], vm.parseJsonBytes32(json, string.concat(p, ".hash")), "fragment leaf");
        }
        (bytes32 root,) = _tree(hashes, 0);
        return root;
    }

    // ------------------------------------------------------------------ shared vectors: openings

    /// Every opening of every case: the expected result, and the recomputation of its values.
    function test_vectorOpenings() public view {
        string memory json = vm.readFile(VECTORS);
        uint256 count = vm.parseJsonUint(json, ".case_count");
        uint256 trues;
        for (uint256 k; k < count; ++k) {
            uint256 openings = vm.parseJsonUint(json, _key(k, ".opening_count"));
            for (uint256 j; j < openings; ++j) {
                string memory p = _opening(k, j, "");
                (RoundProofs.AggregateOpening memory o, RoundProofs.AggregateContext memory ctx) = _decode(json, k, j);
                bool expected = vmj.parseJsonBool(json, string.concat(p, ".expected"));
                assertTrue(harness.aggregateMismatch(o, ctx) == expected, "aggregateMismatch = expected");
                assertTrue(RoundProofs.aggregateMismatch(o, ctx) == expected, "internal call");
                _checkValues(json, p, ctx, expected);
                if (expected) ++trues;
            }
        }
        assertEq(trues, 2, "the two planted values");
    }

    /// @dev recompute over the opened values gives the generator's recomputation, which differs
    /// from the committed values exactly when the opening expects true.
    function _checkValues(string memory json, string memory p, RoundProofs.AggregateContext memory ctx, bool expected)
        internal
        view
    {
        uint32[] memory xs = _u32s(vm.parseJsonUintArray(json, string.concat(p, ".values.xs")));
        (uint32 w, uint32 m) = harness.recompute(
            ctx.rule,
            ctx.alphaBps,
            xs,
            uint32(vm.parseJsonUint(json, string.concat(p, ".values.prev_w"))),
            uint32(vm.parseJsonUint(json, string.concat(p, ".values.prev_m"))),
            ctx.lr,
            ctx.mu,
            ctx.nesterovOn
        );
        assertEq(w, vm.parseJsonUint(json, string.concat(p, ".values.recomputed_w")), "recomputed w");
        assertEq(m, vm.parseJsonUint(json, string.concat(p, ".values.recomputed_m")), "recomputed m");
        bool differs = w != vm.parseJsonUint(json, string.concat(p, ".values.new_w"))
            || m != vm.parseJsonUint(json, string.concat(p, ".values.new_m"));
        assertTrue(differs == expected, "values agree with expected");
    }

    /// Any coordinate of an opened chunk reads the same openings: only the planted coordinates
    /// (33: weight, 50: momentum) are wrong. Openings 0, 1 and 3 of the planted case open
    /// chunks 0, 2 and 3.
    function testFuzz_coordinatesOfOpenedChunks(uint256 which, uint256 j) public view {
        string memory json = vm.readFile(VECTORS);
        uint256[3] memory openingOf = [uint256(0), 1, 3];
        uint256 idx = openingOf[which % 3];
        (RoundProofs.AggregateOpening memory o, RoundProofs.AggregateContext memory ctx) = _decode(json, PLANTED, idx);
        o.coordinate = 16 * (o.coordinate / 16) + (j % 16);
        bool planted = o.coordinate == 33 || o.coordinate == 50;
        assertTrue(RoundProofs.aggregateMismatch(o, ctx) == planted, "only the planted coordinates");
    }

    /// With the initial state as the previous round, the previous momentum opening is never read.
    function test_initialMomentumNotRead() public view {
        string memory json = vm.readFile(VECTORS);
        (RoundProofs.AggregateOpening memory o, RoundProofs.AggregateContext memory ctx) = _decode(json, INITIAL_K1, 0);
        assertTrue(ctx.prevIsInitial, "initial");
        assertEq(o.previous.momentumRoot, bytes32(0), "initial momentum root");
        o.prevMomentum = RoundProofs.CoordinateOpening(7, hex"01", new bytes32[](3), new uint32[](1));
        assertTrue(!harness.aggregateMismatch(o, ctx), "garbage previous momentum ignored");
    }

    /// A leaf whose fragment field differs from its position is a malformed commitment: true.
    function test_mislabelledLeafIsAMismatch() public view {
        string memory json = vm.readFile(VECTORS);
        (RoundProofs.AggregateOpening memory o, RoundProofs.AggregateContext memory ctx) = _decode(json, PLANTED, 0);
        bytes32[] memory hashes = new bytes32[](ctx.fragmentCount);
        for (uint256 i; i < hashes.length; ++i) {
            hashes[i] =
                vm.parseJsonBytes32(json, _key(PLANTED, string.concat(".current_leaves[", vm.toString(i), "].hash")));
        }
        o.current.fragment = 3;
        hashes[o.fragment] = RoundProofs.fragmentLeaf(o.current);
        bytes32[] memory path;
        (ctx.fragmentsRoot, path) = _tree(hashes, o.fragment);
        o.currentPath = path;
        assertTrue(harness.aggregateMismatch(o, ctx), "mislabelled leaf");
    }

    // ------------------------------------------------------------------ tampered proofs

    function test_revert_fragmentLeafPaths() public {
        (RoundProofs.AggregateOpening memory o, RoundProofs.AggregateContext memory ctx) = _load(PLANTED, 0);
        o.currentPath[0] ^= bytes32(uint256(1));
        _expect(abi.encodeWithSelector(RoundProofs.RoundProofs__FragmentLeafNotInRoot.selector, ctx.fragmentsRoot, 1));
        harness.aggregateMismatch(o, ctx);

        (o, ctx) = _load(PLANTED, 0);
        o.current.weightsSumsq ^= 1; // a leaf field: the leaf hash changes
        _expect(abi.encodeWithSelector(RoundProofs.RoundProofs__FragmentLeafNotInRoot.selector, ctx.fragmentsRoot, 1));
        harness.aggregateMismatch(o, ctx);

        (o, ctx) = _load(PLANTED, 0);
        o.previousPath[1] ^= bytes32(uint256(1));
        _expect(
            abi.encodeWithSelector(RoundProofs.RoundProofs__FragmentLeafNotInRoot.selector, ctx.prevFragmentsRoot, 1)
        );
        harness.aggregateMismatch(o, ctx);

        (o, ctx) = _load(PLANTED, 0);
        o.currentPath = new bytes32[](1); // F = 4: the path has 2 siblings
        _expect(abi.encodeWithSelector(RoundProofs.RoundProofs__FragmentLeafNotInRoot.selector, ctx.fragmentsRoot, 1));
        harness.aggregateMismatch(o, ctx);
    }

    function test_revert_entryOrderAndCount() public {
        (RoundProofs.AggregateOpening memory o, RoundProofs.AggregateContext memory ctx) = _load(PLANTED, 0);
        (o.entries[0], o.entries[1]) = (o.entries[1], o.entries[0]);
        _expect(abi.encodeWithSelector(RoundProofs.RoundProofs__EntriesNotAscending.selector, 1, 0));
        harness.aggregateMismatch(o, ctx);

        (o, ctx) = _load(PLANTED, 0);
        o.entries[3] = o.entries[2]; // a duplicate
        _expect(abi.encodeWithSelector(RoundProofs.RoundProofs__EntriesNotAscending.selector, 3, 2));
        harness.aggregateMismatch(o, ctx);

        (o, ctx) = _load(PLANTED, 0);
        RoundProofs.AcceptedEntry[] memory fewer = new RoundProofs.AcceptedEntry[](7);
        for (uint256 i; i < 7; ++i) {
            fewer[i] = o.entries[i];
        }
        o.entries = fewer; // one accepted submission left out
        _expect(abi.encodeWithSelector(RoundProofs.RoundProofs__EntryCountMismatch.selector, 7, 8));
        harness.aggregateMismatch(o, ctx);
    }

    function test_revert_entryBinding() public {
        (RoundProofs.AggregateOpening memory o, RoundProofs.AggregateContext memory ctx) = _load(PLANTED, 0);
        RoundProofs.AcceptedEntry memory e = o.entries[4];
        e.payloadRoot ^= bytes32(uint256(1)); // no longer the signed payload root
        bytes32 computed = RoundProofs.structHashOfCidHash(
            ctx.taskId, ctx.round, o.fragment, e.baseRoot, e.payloadRoot, e.payloadSumsq, e.cidHash, e.payloadHash
        );
        _expect(abi.encodeWithSelector(RoundProofs.RoundProofs__StructHashMismatch.selector, 4, computed));
        harness.aggregateMismatch(o, ctx);

        // The same, with a struct hash that matches the forged fields: the slot no longer verifies.
        e.structHash = computed;
        bytes32 acceptedRoot = o.current.acceptedRoot;
        _expect(abi.encodeWithSelector(RoundProofs.RoundProofs__SlotNotInAcceptedRoot.selector, 4, acceptedRoot));
        harness.aggregateMismatch(o, ctx);

        (o, ctx) = _load(PLANTED, 0);
        o.entries[5].slotPath[2] ^= bytes32(uint256(1));
        _expect(abi.encodeWithSelector(RoundProofs.RoundProofs__SlotNotInAcceptedRoot.selector, 5, acceptedRoot));
        harness.aggregateMismatch(o, ctx);

        // A trainer who was not accepted (slot 1 is empty in fragment 2 of the median case).
        (o, ctx) = _load(MEDIAN_K5, 0);
        assertEq(o.entries[0].trainerIndex, 0, "first accepted trainer");
        o.entries[0].trainerIndex = 1;
        _expect(
            abi.encodeWithSelector(RoundProofs.RoundProofs__SlotNotInAcceptedRoot.selector, 1, o.current.acceptedRoot)
        );
        harness.aggregateMismatch(o, ctx);
    }

    function test_revert_openings() public {
        (RoundProofs.AggregateOpening memory o, RoundProofs.AggregateContext memory ctx) = _load(PLANTED, 1);
        RoundProofs.AcceptedEntry memory e = o.entries[2];
        e.payload.chunk[5] ^= 0x01;
        _expect(
            abi.encodeWithSelector(RoundProofs.RoundProofs__OpeningNotInRoot.selector, e.payloadRoot, e.payloadSumsq, 2)
        );
        harness.aggregateMismatch(o, ctx);

        (o, ctx) = _load(PLANTED, 1);
        e = o.entries[7];
        e.payload.siblingS[0] ^= 1;
        _expect(
            abi.encodeWithSelector(RoundProofs.RoundProofs__OpeningNotInRoot.selector, e.payloadRoot, e.payloadSumsq, 2)
        );
        harness.aggregateMismatch(o, ctx);

        (o, ctx) = _load(PLANTED, 1);
        o.newWeights.chunkIndex = 3;
        _expect(abi.encodeWithSelector(RoundProofs.RoundProofs__WrongChunk.selector, 3, 33));
        harness.aggregateMismatch(o, ctx);

        // Another chunk's valid opening, relabelled: the chunk index check catches it first.
        (o, ctx) = _load(PLANTED, 1);
        (RoundProofs.AggregateOpening memory other,) = _load(PLANTED, 3);
        o.newMomentum = other.newMomentum;
        _expect(abi.encodeWithSelector(RoundProofs.RoundProofs__WrongChunk.selector, 3, 33));
        harness.aggregateMismatch(o, ctx);
        other.newMomentum.chunkIndex = 2;
        o.newMomentum = other.newMomentum;
        _expect(
            abi.encodeWithSelector(
                RoundProofs.RoundProofs__OpeningNotInRoot.selector, o.current.momentumRoot, o.current.momentumSumsq, 2
            )
        );
        harness.aggregateMismatch(o, ctx);

        (o, ctx) = _load(PLANTED, 1);
        o.prevMomentum.siblingH[1] ^= bytes32(uint256(1));
        _expect(
            abi.encodeWithSelector(
                RoundProofs.RoundProofs__OpeningNotInRoot.selector, o.previous.momentumRoot, o.previous.momentumSumsq, 2
            )
        );
        harness.aggregateMismatch(o, ctx);

        (o, ctx) = _load(PLANTED, 1);
        o.prevWeights.siblingH = new bytes32[](2); // wrong proof length (n = 70: 5 chunks, depth 3)
        o.prevWeights.siblingS = new uint32[](2);
        _expect(
            abi.encodeWithSelector(
                RoundProofs.RoundProofs__OpeningNotInRoot.selector, o.previous.weightsRoot, o.previous.weightsSumsq, 2
            )
        );
        harness.aggregateMismatch(o, ctx);
    }

    function test_revert_ranges() public {
        (RoundProofs.AggregateOpening memory o, RoundProofs.AggregateContext memory ctx) = _load(PLANTED, 4);
        o.coordinate = 70;
        _expect(abi.encodeWithSelector(RoundProofs.RoundProofs__CoordinateOutOfRange.selector, 70, 70));
        harness.aggregateMismatch(o, ctx);

        (o, ctx) = _load(PLANTED, 4);
        o.fragment = 4;
        _expect(abi.encodeWithSelector(RoundProofs.RoundProofs__FragmentOutOfRange.selector, 4, 4));
        harness.aggregateMismatch(o, ctx);

        (o, ctx) = _load(PLANTED, 4);
        ctx.slotWidth = 6;
        _expect(abi.encodeWithSelector(RoundProofs.RoundProofs__BadWidth.selector, 6));
        harness.aggregateMismatch(o, ctx);

        (o, ctx) = _load(PLANTED, 4);
        ctx.slotWidth = 16; // the right shape is 8 slots: every slot path is one sibling short
        _expect(
            abi.encodeWithSelector(RoundProofs.RoundProofs__SlotNotInAcceptedRoot.selector, 0, o.current.acceptedRoot)
        );
        harness.aggregateMismatch(o, ctx);
    }

    // ------------------------------------------------------------------ pieces

    function test_verifyPath() public view {
        bytes32 leaf = keccak256("leaf");
        bytes32[] memory none = new bytes32[](0);
        assertTrue(harness.verifyPath(leaf, leaf, 0, none, 1), "width 1: root is the leaf");
        assertTrue(!harness.verifyPath(leaf, leaf, 1, none, 1), "index = width");
        assertTrue(!harness.verifyPath(leaf, leaf, 0, none, 0), "width 0");
        bytes32[] memory hashes = new bytes32[](3);
        for (uint256 i; i < 3; ++i) {
            hashes[i] = keccak256(abi.encode(i));
        }
        for (uint256 i; i < 4; ++i) {
            (bytes32 root, bytes32[] memory path) = _tree(hashes, i);
            bytes32 at = i < 3 ? hashes[i] : bytes32(0);
            assertTrue(harness.verifyPath(root, at, i, path, 4), "position");
            assertTrue(!harness.verifyPath(root, at, i ^ 1, path, 4), "other position");
            assertTrue(!harness.verifyPath(root, at, i, path, 3), "width 3");
            assertTrue(!harness.verifyPath(root, at, i, path, 8), "width 8");
            assertTrue(!harness.verifyPath(root, at, i + 4, path, 4), "index >= width");
        }
        assertEq(harness.nextPow2(0), 1, "nextPow2(0)");
        assertEq(harness.nextPow2(1), 1, "nextPow2(1)");
        assertEq(harness.nextPow2(5), 8, "nextPow2(5)");
        assertEq(harness.nextPow2(8), 8, "nextPow2(8)");
    }

    function test_openValue() public {
        string memory json = vm.readFile(VECTORS);
        (RoundProofs.AggregateOpening memory o, RoundProofs.AggregateContext memory ctx) = _decode(json, PLANTED, 1);
        uint32 v = harness.openValue(o.current.weightsRoot, o.current.weightsSumsq, 70, 33, o.newWeights);
        assertEq(v, vm.parseJsonUint(json, _opening(PLANTED, 1, ".values.new_w")), "value");
        assertEq(ctx.fragmentSize, 70, "n");
        _expect(abi.encodeWithSelector(RoundProofs.RoundProofs__CoordinateOutOfRange.selector, 70, 70));
        harness.openValue(o.current.weightsRoot, o.current.weightsSumsq, 70, 70, o.newWeights);
    }

    // ------------------------------------------------------------------ gas

    /// aggregateMismatch at K = 8 accepted payloads, n = 2^16 (chunk depth 12), Mean, 8 slots,
    /// F = 4: 12 coordinate openings, 8 slot paths, 2 fragment paths, one recomputation.
    function test_gas_aggregateMismatch_k8_n65536() public {
        string memory json = vm.readFile(VECTORS);
        (RoundProofs.AggregateOpening memory o, RoundProofs.AggregateContext memory ctx) = _decode(json, GAS, 0);
        assertEq(ctx.fragmentSize, 1 << 16, "n");
        assertEq(o.entries.length, 8, "K");
        uint256 g = gasleft();
        bool bad = RoundProofs.aggregateMismatch(o, ctx);
        g -= gasleft();
        assertTrue(!bad, "honest");
        emit log_named_uint("gas: aggregateMismatch K=8 n=2^16, internal call", g);
        bytes memory call = abi.encodeCall(RoundProofsHarness.aggregateMismatch, (o, ctx));
        emit log_named_uint("calldata bytes of the call (selector + opening + context)", call.length);
        g = gasleft();
        bad = harness.aggregateMismatch(o, ctx);
        g -= gasleft();
        assertTrue(!bad, "honest (harness)");
        emit log_named_uint("gas: aggregateMismatch K=8 n=2^16, external call with ABI decoding", g);
        g = gasleft();
        RoundProofs.openValue(o.current.weightsRoot, o.current.weightsSumsq, 1 << 16, o.coordinate, o.newWeights);
        g -= gasleft();
        emit log_named_uint("gas: one openValue at n=2^16, internal call", g);
        uint32[] memory xs = new uint32[](8);
        for (uint256 i; i < 8; ++i) {
            xs[i] = uint32(0x3C000000 + 0x00123457 * i);
        }
        g = gasleft();
        RoundProofs.recompute(ctx.rule, ctx.alphaBps, xs, 0x3D000000, 0x3B000000, ctx.lr, ctx.mu, true);
        g -= gasleft();
        emit log_named_uint("gas: recompute (Mean of 8 + Nesterov), internal call", g);
    }

    // ------------------------------------------------------------------ helpers

    function _load(uint256 k, uint256 j)
        internal
        view
        returns (RoundProofs.AggregateOpening memory o, RoundProofs.AggregateContext memory ctx)
    {
        return _decode(vm.readFile(VECTORS), k, j);
    }

    function _decode(string memory json, uint256 k, uint256 j)
        internal
        pure
        returns (RoundProofs.AggregateOpening memory o, RoundProofs.AggregateContext memory ctx)
    {
        o = abi.decode(vm.parseJsonBytes(json, _opening(k, j, ".opening_abi")), (RoundProofs.AggregateOpening));
        ctx = abi.decode(vm.parseJsonBytes(json, _opening(k, j, ".context_abi")), (RoundProofs.AggregateContext));
    }

    function _expect(bytes memory revertData) internal {
        vm.expectRevert(revertData);
    }

    /// @dev Root of the positional tree over `hashes` (padded with zeros to a power of two) and
    /// the path of position `index`.
    function _tree(bytes32[] memory hashes, uint256 index) internal pure returns (bytes32, bytes32[] memory path) {
        uint256 width = RoundProofs.nextPow2(hashes.length);
        bytes32[] memory level = new bytes32[](width);
        for (uint256 i; i < hashes.length; ++i) {
            level[i] = hashes[i];
        }
        uint256 d;
        while ((uint256(1) << d) < width) ++d;
        path = new bytes32[](d);
        for (uint256 k; k < d; ++k) {
            path[k] = level[index ^ 1];
            uint256 half = level.length / 2;
            bytes32[] memory up = new bytes32[](half);
            for (uint256 i; i < half; ++i) {
                up[i] = keccak256(abi.encodePacked(level[2 * i], level[2 * i + 1]));
            }
            level = up;
            index >>= 1;
        }
        return (level[0], path);
    }

    function _key(uint256 k, string memory suffix) internal pure returns (string memory) {
        return string.concat(".cases[", vm.toString(k), "]", suffix);
    }

    function _opening(uint256 k, uint256 j, string memory suffix) internal pure returns (string memory) {
        return string.concat(_key(k, ".openings["), vm.toString(j), "]", suffix);
    }

    function _u32s(uint256[] memory a) internal pure returns (uint32[] memory out) {
        out = new uint32[](a.length);
        for (uint256 i; i < a.length; ++i) {
            // bit patterns from the vectors: < 2^32
            // forge-lint: disable-next-line(unsafe-typecast)
            out[i] = uint32(a[i]);
        }
    }
}
