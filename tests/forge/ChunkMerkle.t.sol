// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {TestBase} from "./lib/Cheats.sol";
import {ChunkMerkle} from "../../contracts/lib/ChunkMerkle.sol";
import {ChunkMerkleHarness} from "../../contracts/mocks/ChunkMerkleHarness.sol";

/// @notice ChunkMerkle (contracts/PROTOCOL.md §2) against tests/vectors/chunk_commitment_v1.json
/// (written by an independent Python reference), plus fuzzed openings and tampering.
contract ChunkMerkleTest is TestBase {
    /// @dev ds-test style log, printed by `forge test -vv`.
    event log_named_uint(string key, uint256 val);

    string internal constant VECTORS = "tests/vectors/chunk_commitment_v1.json";
    /// @dev Index of the vector used as the fuzz fixture: n1000_mixed (63 chunks, depth 6).
    uint256 internal constant FIXTURE = 6;

    ChunkMerkleHarness internal harness;

    // The fixture vector's tree, built in setUp from its chunks (every level, padded).
    uint256 internal fxN;
    bytes32 internal fxRootH;
    uint32 internal fxRootS;
    bytes[] internal fxChunks;
    bytes32[][] internal fxLevelH;
    uint32[][] internal fxLevelS;

    function setUp() public {
        harness = new ChunkMerkleHarness();
        string memory json = vm.readFile(VECTORS);
        string memory v = _key(FIXTURE, "");
        fxN = vm.parseJsonUint(json, string.concat(v, ".n"));
        assertEq(fxN, 1000, "fixture is n1000_mixed");
        fxRootH = vm.parseJsonBytes32(json, string.concat(v, ".root_h"));
        fxRootS = uint32(vm.parseJsonUint(json, string.concat(v, ".root_s")));
        bytes[] memory chunks = vm.parseJsonBytesArray(json, string.concat(v, ".chunks"));
        (bytes32[][] memory lh, uint32[][] memory ls) = _levels(chunks);
        for (uint256 i; i < chunks.length; ++i) fxChunks.push(chunks[i]);
        for (uint256 k; k < lh.length; ++k) {
            fxLevelH.push(lh[k]);
            fxLevelS.push(ls[k]);
        }
        assertEq(lh[lh.length - 1][0], fxRootH, "fixture root h rebuilt from its chunks");
        assertEq(ls[ls.length - 1][0], fxRootS, "fixture root s rebuilt from its chunks");
    }

    // ------------------------------------------------------------------ shared vectors

    function test_vectors() public view {
        string memory json = vm.readFile(VECTORS);
        uint256 count = vm.parseJsonUint(json, ".vector_count");
        assertEq(count, 7, "vector count");
        for (uint256 k; k < count; ++k) _checkVector(json, k);
    }

    function _checkVector(string memory json, uint256 k) internal view {
        uint256 n = vm.parseJsonUint(json, _key(k, ".n"));
        uint256 m = vm.parseJsonUint(json, _key(k, ".num_chunks"));
        uint256 d = vm.parseJsonUint(json, _key(k, ".depth"));
        assertEq(harness.numChunks(n), m, "numChunks");
        assertEq(harness.depth(m), d, "depth");
        bytes[] memory chunks = vm.parseJsonBytesArray(json, _key(k, ".chunks"));
        assertEq(chunks.length, m, "chunks");
        _checkChunks(json, k, n, chunks);
        bytes32 rootH = vm.parseJsonBytes32(json, _key(k, ".root_h"));
        uint32 rootS = uint32(vm.parseJsonUint(json, _key(k, ".root_s")));
        _checkRoot(json, k, d, rootH, rootS);
        uint256 openings = vm.parseJsonUint(json, _key(k, ".opening_count"));
        for (uint256 o; o < openings; ++o) {
            _checkOpening(json, string.concat(_key(k, ".openings["), vm.toString(o), "]"), n, d, chunks, rootH, rootS);
        }
    }

    /// @dev Each chunk's leaf (h, s), its 16 values and its padding.
    function _checkChunks(string memory json, uint256 k, uint256 n, bytes[] memory chunks) internal view {
        bytes[] memory values = vm.parseJsonBytesArray(json, _key(k, ".values"));
        bytes32[] memory leafH = vm.parseJsonBytes32Array(json, _key(k, ".leaf_h"));
        uint256[] memory leafS = vm.parseJsonUintArray(json, _key(k, ".leaf_s"));
        for (uint256 i; i < chunks.length; ++i) {
            (bytes32 h, uint32 s) = harness.leaf(chunks[i]);
            assertEq(h, leafH[i], "leaf h");
            assertEq(s, leafS[i], "leaf s");
            for (uint256 j; j < 16; ++j) {
                uint256 c = 16 * i + j;
                uint32 want = c < n ? uint32(bytes4(values[c])) : uint32(0);
                assertEq(harness.valueAt(chunks[i], j), want, "valueAt");
            }
            assertTrue(harness.paddingIsZero(chunks[i], n, i), "padding of a vector's chunk");
        }
    }

    /// @dev The root from the vector's leaves, by the library's node over the padded tree.
    function _checkRoot(string memory json, uint256 k, uint256 d, bytes32 rootH, uint32 rootS) internal view {
        bytes32[] memory leafH = vm.parseJsonBytes32Array(json, _key(k, ".leaf_h"));
        uint256[] memory leafS = vm.parseJsonUintArray(json, _key(k, ".leaf_s"));
        bytes32[] memory h = new bytes32[](1 << d);
        uint32[] memory s = new uint32[](1 << d);
        for (uint256 i; i < leafH.length; ++i) (h[i], s[i]) = (leafH[i], uint32(leafS[i]));
        for (uint256 width = h.length; width > 1; width /= 2) {
            for (uint256 i; i < width / 2; ++i) (h[i], s[i]) = harness.node(h[2 * i], s[2 * i], h[2 * i + 1], s[2 * i + 1]);
        }
        assertEq(h[0], rootH, "root h");
        assertEq(s[0], rootS, "root s");
    }

    /// @dev One opening with the generator's proof.
    function _checkOpening(
        string memory json,
        string memory p,
        uint256 n,
        uint256 d,
        bytes[] memory chunks,
        bytes32 rootH,
        uint32 rootS
    ) internal view {
        uint256 c = vm.parseJsonUint(json, string.concat(p, ".coordinate"));
        uint256 i = vm.parseJsonUint(json, string.concat(p, ".chunk_index"));
        assertEq(i, c / 16, "chunk index");
        bytes32[] memory sibH = new bytes32[](0);
        uint32[] memory sibS = new uint32[](0);
        if (d > 0) {
            sibH = vm.parseJsonBytes32Array(json, string.concat(p, ".sibling_h"));
            sibS = _u32s(vm.parseJsonUintArray(json, string.concat(p, ".sibling_s")));
        }
        assertTrue(harness.verify(rootH, rootS, n, i, chunks[i], sibH, sibS), "vector opening verifies");
        assertTrue(!harness.verify(rootH, rootS ^ 1, n, i, chunks[i], sibH, sibS), "wrong root s");
        assertEq(harness.valueAt(chunks[i], c % 16), vm.parseJsonUint(json, string.concat(p, ".value")), "value");
    }

    function test_emptySubtrees() public view {
        string memory json = vm.readFile(VECTORS);
        bytes32 h;
        uint32 s;
        for (uint256 k; k <= 16; ++k) {
            string memory p = string.concat(".empty_subtrees[", vm.toString(k), "]");
            assertEq(h, vm.parseJsonBytes32(json, string.concat(p, ".h")), "empty subtree h");
            assertEq(s, vm.parseJsonUint(json, string.concat(p, ".s")), "empty subtree s");
            (h, s) = ChunkMerkle.node(h, s, h, s);
        }
    }

    // ------------------------------------------------------------------ openings of the fixture

    function test_everyFixtureOpeningVerifies() public view {
        for (uint256 i; i < fxChunks.length; ++i) {
            (bytes32[] memory sibH, uint32[] memory sibS) = _proof(i);
            assertTrue(ChunkMerkle.verify(fxRootH, fxRootS, fxN, i, fxChunks[i], sibH, sibS), "opening");
        }
    }

    function testFuzz_tamperedChunkFails(uint256 i, uint256 pos, uint256 mask) public view {
        i %= fxChunks.length;
        bytes memory chunk = bytes.concat(fxChunks[i]); // a copy
        chunk[pos % 64] ^= bytes1(uint8(bound(mask, 1, 255)));
        (bytes32[] memory sibH, uint32[] memory sibS) = _proof(i);
        assertTrue(!ChunkMerkle.verify(fxRootH, fxRootS, fxN, i, chunk, sibH, sibS), "tampered chunk");
    }

    function testFuzz_tamperedSiblingFails(uint256 i, uint256 level, bytes32 hMask, uint32 sMask) public view {
        vm.assume(hMask != 0 || sMask != 0);
        i %= fxChunks.length;
        (bytes32[] memory sibH, uint32[] memory sibS) = _proof(i);
        level %= sibH.length;
        sibH[level] ^= hMask;
        sibS[level] ^= sMask;
        assertTrue(!ChunkMerkle.verify(fxRootH, fxRootS, fxN, i, fxChunks[i], sibH, sibS), "tampered sibling");
    }

    function testFuzz_tamperedRootFails(uint256 i, bytes32 hMask, uint32 sMask) public view {
        vm.assume(hMask != 0 || sMask != 0);
        i %= fxChunks.length;
        (bytes32[] memory sibH, uint32[] memory sibS) = _proof(i);
        assertTrue(
            !ChunkMerkle.verify(fxRootH ^ hMask, fxRootS ^ sMask, fxN, i, fxChunks[i], sibH, sibS), "tampered root"
        );
    }

    function testFuzz_wrongIndexFails(uint256 i, uint256 j) public view {
        i %= fxChunks.length;
        vm.assume(j != i);
        (bytes32[] memory sibH, uint32[] memory sibS) = _proof(i);
        assertTrue(!ChunkMerkle.verify(fxRootH, fxRootS, fxN, j, fxChunks[i], sibH, sibS), "wrong index");
    }

    function testFuzz_wrongProofLengthFails(uint256 i, bytes32 extraH, uint32 extraS, bool longer) public view {
        i %= fxChunks.length;
        (bytes32[] memory sibH, uint32[] memory sibS) = _proof(i);
        uint256 d = sibH.length;
        bytes32[] memory h2 = new bytes32[](longer ? d + 1 : d - 1);
        uint32[] memory s2 = new uint32[](h2.length);
        for (uint256 k; k < h2.length; ++k) {
            if (k < d) (h2[k], s2[k]) = (sibH[k], sibS[k]);
            else (h2[k], s2[k]) = (extraH, extraS);
        }
        assertTrue(!ChunkMerkle.verify(fxRootH, fxRootS, fxN, i, fxChunks[i], h2, s2), "proof length");
        assertTrue(!ChunkMerkle.verify(fxRootH, fxRootS, fxN, i, fxChunks[i], sibH, s2), "sums length");
        assertTrue(!ChunkMerkle.verify(fxRootH, fxRootS, fxN, i, fxChunks[i], h2, sibS), "hashes length");
    }

    /// n is not hashed: an opening verifies for exactly those n with the same depth that still
    /// hold the chunk; the caller must take n from its own state.
    function testFuzz_otherN(uint256 i, uint256 n2) public view {
        i %= fxChunks.length;
        n2 = bound(n2, 0, 1 << 40);
        (bytes32[] memory sibH, uint32[] memory sibS) = _proof(i);
        uint256 m2 = ChunkMerkle.numChunks(n2);
        bool expected = i < m2 && ChunkMerkle.depth(m2) == sibH.length;
        assertTrue(
            ChunkMerkle.verify(fxRootH, fxRootS, n2, i, fxChunks[i], sibH, sibS) == expected, "other n"
        );
    }

    function test_malformedInputsAreFalse() public view {
        (bytes32[] memory sibH, uint32[] memory sibS) = _proof(0);
        bytes memory chunk = fxChunks[0];
        assertTrue(!harness.verify(fxRootH, fxRootS, 0, 0, chunk, sibH, sibS), "n = 0");
        assertTrue(!harness.verify(fxRootH, fxRootS, fxN, 63, chunk, sibH, sibS), "index = m");
        assertTrue(!harness.verify(fxRootH, fxRootS, fxN, type(uint256).max, chunk, sibH, sibS), "huge index");
        assertTrue(!harness.verify(fxRootH, fxRootS, fxN, 0, bytes.concat(chunk, hex"00"), sibH, sibS), "65 bytes");
        assertTrue(!harness.verify(fxRootH, fxRootS, fxN, 0, new bytes(0), sibH, sibS), "no chunk");
        assertTrue(!harness.verify(fxRootH, fxRootS, type(uint256).max, 0, chunk, sibH, sibS), "huge n");
    }

    // ------------------------------------------------------------------ random trees

    /// A tree built here level by level from random chunks (random bit patterns: any value,
    /// NaN and inf included): every opening verifies, its neighbour's chunk does not.
    function testFuzz_randomTreeOpens(uint256 seed, uint256 nRaw, uint256 iRaw) public pure {
        uint256 n = bound(nRaw, 1, 16 * 70);
        uint256 m = ChunkMerkle.numChunks(n);
        bytes[] memory chunks = new bytes[](m);
        for (uint256 c; c < m; ++c) {
            chunks[c] = abi.encodePacked(keccak256(abi.encode(seed, c, 0)), keccak256(abi.encode(seed, c, 1)));
            if (c == m - 1) _zeroPadding(chunks[c], n - 16 * c);
        }
        (bytes32[][] memory lh, uint32[][] memory ls) = _levels(chunks);
        bytes32 rootH = lh[lh.length - 1][0];
        uint32 rootS = ls[ls.length - 1][0];
        uint256 i = iRaw % m;
        (bytes32[] memory sibH, uint32[] memory sibS) = _proofFrom(lh, ls, i);
        assertTrue(ChunkMerkle.verify(rootH, rootS, n, i, chunks[i], sibH, sibS), "random opening");
        assertTrue(ChunkMerkle.paddingIsZero(chunks[i], n, i), "padding");
        if (m > 1) {
            uint256 other = i == m - 1 ? i - 1 : i + 1;
            assertTrue(!ChunkMerkle.verify(rootH, rootS, n, i, chunks[other], sibH, sibS), "neighbour's chunk");
        }
    }

    // ------------------------------------------------------------------ padding and values

    function testFuzz_padding(uint256 nRaw, uint256 pos, uint256 mask, bytes32 a, bytes32 b) public view {
        uint256 n = bound(nRaw, 1, 1 << 40);
        uint256 last = ChunkMerkle.numChunks(n) - 1;
        uint256 real = n - 16 * last; // 1..16 values of the last chunk are real
        bytes memory chunk = abi.encodePacked(a, b);
        _zeroPadding(chunk, real);
        assertTrue(harness.paddingIsZero(chunk, n, last), "zero padding");
        pos %= 64;
        chunk[pos] ^= bytes1(uint8(bound(mask, 1, 255)));
        assertTrue(harness.paddingIsZero(chunk, n, last) == (pos < 4 * real), "a byte of padding or of a value");
        if (last > 0) assertTrue(harness.paddingIsZero(abi.encodePacked(~bytes32(0), ~bytes32(0)), n, last - 1), "full");
    }

    function testFuzz_valueAt(bytes32 a, bytes32 b, uint256 j) public view {
        j %= 16;
        bytes memory chunk = abi.encodePacked(a, b);
        uint256 word = j < 8 ? uint256(a) : uint256(b);
        assertEq(harness.valueAt(chunk, j), uint32(word >> (224 - 32 * (j % 8))), "valueAt");
    }

    function test_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(ChunkMerkle.ChunkMerkle__BadChunkLength.selector, 63));
        harness.leaf(new bytes(63));
        vm.expectRevert(abi.encodeWithSelector(ChunkMerkle.ChunkMerkle__BadChunkLength.selector, 65));
        harness.valueAt(new bytes(65), 0);
        vm.expectRevert(abi.encodeWithSelector(ChunkMerkle.ChunkMerkle__ValueIndexOutOfRange.selector, 16));
        harness.valueAt(new bytes(64), 16);
        vm.expectRevert(abi.encodeWithSelector(ChunkMerkle.ChunkMerkle__ChunkIndexOutOfRange.selector, 2, 2));
        harness.paddingIsZero(new bytes(64), 17, 2);
        vm.expectRevert(abi.encodeWithSelector(ChunkMerkle.ChunkMerkle__ChunkIndexOutOfRange.selector, 0, 0));
        harness.paddingIsZero(new bytes(64), 0, 0);
        vm.expectRevert(abi.encodeWithSelector(ChunkMerkle.ChunkMerkle__BadChunkLength.selector, 0));
        harness.paddingIsZero(new bytes(0), 17, 1);
    }

    function test_shape() public view {
        assertEq(harness.numChunks(0), 0, "m(0)");
        assertEq(harness.numChunks(1), 1, "m(1)");
        assertEq(harness.numChunks(16), 1, "m(16)");
        assertEq(harness.numChunks(17), 2, "m(17)");
        assertEq(harness.numChunks(type(uint256).max), (type(uint256).max >> 4) + 1, "m(max)");
        assertEq(harness.depth(0), 0, "d(0)");
        assertEq(harness.depth(1), 0, "d(1)");
        assertEq(harness.depth(2), 1, "d(2)");
        assertEq(harness.depth(3), 2, "d(3)");
        assertEq(harness.depth(62_500), 16, "d(62500)");
        assertEq(harness.depth(65_536), 16, "d(2^16)");
        assertEq(harness.depth(65_537), 17, "d(2^16+1)");
        assertEq(harness.depth(type(uint256).max), 256, "d(max)");
    }

    // ------------------------------------------------------------------ gas

    /// verify of an opening of a 1M-value fragment: 62,500 chunks, 16 levels.
    function test_gas_verify_depth16() public {
        _gasVerify(1_000_000, "depth 16 (n = 1,000,000)");
    }

    /// verify at depth 10 (n = 16,000: 1,000 chunks).
    function test_gas_verify_depth10() public {
        _gasVerify(16_000, "depth 10 (n = 16,000)");
    }

    function test_gas_leaf_and_node() public {
        bytes memory chunk = _realisticChunk();
        uint256 g = gasleft();
        (bytes32 h, uint32 s) = ChunkMerkle.leaf(chunk);
        g -= gasleft();
        emit log_named_uint("gas: leaf (16 mul + 16 add + keccak of 65 bytes), internal", g);
        g = gasleft();
        (h, s) = ChunkMerkle.node(h, s, keccak256("x"), 0x3F800000);
        g -= gasleft();
        emit log_named_uint("gas: node (keccak of 73 bytes + 1 add), internal", g);
        assertTrue(h != 0 && s != 0, "used");
    }

    function _gasVerify(uint256 n, string memory what) internal {
        uint256 m = ChunkMerkle.numChunks(n);
        uint256 d = ChunkMerkle.depth(m);
        uint256 i = (m - 1) / 3; // a mix of left and right steps
        bytes memory chunk = _realisticChunk();
        bytes32[] memory sibH = new bytes32[](d);
        uint32[] memory sibS = new uint32[](d);
        (bytes32 h, uint32 s) = ChunkMerkle.leaf(chunk);
        for (uint256 k; k < d; ++k) {
            sibH[k] = keccak256(abi.encode(k));
            sibS[k] = uint32(0x3E000000 + 0x00812345 * k); // positive normal sums growing upward
            if ((i >> k) & 1 == 0) (h, s) = ChunkMerkle.node(h, s, sibH[k], sibS[k]);
            else (h, s) = ChunkMerkle.node(sibH[k], sibS[k], h, s);
        }
        uint256 g = gasleft();
        bool ok = ChunkMerkle.verify(h, s, n, i, chunk, sibH, sibS);
        g -= gasleft();
        assertTrue(ok, "gas fixture verifies");
        emit log_named_uint(string.concat("gas: verify ", what, ", internal call"), g);
        g = gasleft();
        ok = harness.verify(h, s, n, i, chunk, sibH, sibS);
        g -= gasleft();
        assertTrue(ok, "gas fixture verifies (harness)");
        emit log_named_uint(string.concat("gas: verify ", what, ", external call with ABI decoding"), g);
    }


    // ------------------------------------------------------------------ helpers

    /// @dev 16 normal values of mixed sign and magnitude around 1e-3..1 (a pseudo-gradient's range).
    function _realisticChunk() internal pure returns (bytes memory chunk) {
        for (uint256 j; j < 16; ++j) {
            uint256 sign = j % 3 == 0 ? uint256(1) << 31 : uint256(0);
            uint32 v = uint32(sign | ((117 + (j * 7) % 10) << 23) | ((j * 0x9E3779) & 0x7FFFFF));
            chunk = bytes.concat(chunk, bytes4(v));
        }
    }

    /// @dev Every level of the tree over `chunks`, leaves padded to a power of two with (0, +0).
    function _levels(bytes[] memory chunks) internal pure returns (bytes32[][] memory lh, uint32[][] memory ls) {
        uint256 d = ChunkMerkle.depth(chunks.length);
        lh = new bytes32[][](d + 1);
        ls = new uint32[][](d + 1);
        lh[0] = new bytes32[](1 << d);
        ls[0] = new uint32[](1 << d);
        for (uint256 i; i < chunks.length; ++i) (lh[0][i], ls[0][i]) = ChunkMerkle.leaf(chunks[i]);
        for (uint256 k = 1; k <= d; ++k) {
            uint256 w = 1 << (d - k);
            lh[k] = new bytes32[](w);
            ls[k] = new uint32[](w);
            for (uint256 i; i < w; ++i) {
                (lh[k][i], ls[k][i]) =
                    ChunkMerkle.node(lh[k - 1][2 * i], ls[k - 1][2 * i], lh[k - 1][2 * i + 1], ls[k - 1][2 * i + 1]);
            }
        }
    }

    function _proofFrom(bytes32[][] memory lh, uint32[][] memory ls, uint256 i)
        internal
        pure
        returns (bytes32[] memory sibH, uint32[] memory sibS)
    {
        uint256 d = lh.length - 1;
        sibH = new bytes32[](d);
        sibS = new uint32[](d);
        for (uint256 k; k < d; ++k) (sibH[k], sibS[k]) = (lh[k][(i >> k) ^ 1], ls[k][(i >> k) ^ 1]);
    }

    function _proof(uint256 i) internal view returns (bytes32[] memory, uint32[] memory) {
        return _proofFrom(fxLevelH, fxLevelS, i);
    }

    /// @dev Zeroes the values `real..15` of a 64-byte chunk.
    function _zeroPadding(bytes memory chunk, uint256 real) internal pure {
        for (uint256 p = 4 * real; p < 64; ++p) chunk[p] = 0;
    }

    function _u32s(uint256[] memory a) internal pure returns (uint32[] memory out) {
        out = new uint32[](a.length);
        for (uint256 i; i < a.length; ++i) out[i] = uint32(a[i]);
    }

    function _key(uint256 k, string memory field) internal pure returns (string memory) {
        return string.concat(".vectors[", vm.toString(k), "]", field);
    }
}
