// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

import {TestBase} from "./lib/Cheats.sol";
import {Binary32} from "../../contracts/lib/Binary32.sol";
import {Referee} from "../../contracts/lib/Referee.sol";
import {Binary32Harness} from "../../contracts/mocks/Binary32Harness.sol";

/// @notice Binary32 and Referee (PROTOCOL.md §1): edge cases whose expected bit patterns are
/// derived by hand from the IEEE-754 rules (the derivation is in the comment of each case),
/// fuzzed algebraic identities that must hold bit for bit, reverts, and gas per operation.
/// Bulk agreement with numpy / the trainer is tests/referee/test_binary32_agreement.py.
contract Binary32Test is TestBase {
    using Binary32 for uint32;

    event log_named_uint(string key, uint256 val);

    // Bit patterns used below.
    uint32 internal constant PZERO = 0x00000000;
    uint32 internal constant NZERO = 0x80000000;
    uint32 internal constant MIN_SUB = 0x00000001; // 2^-149
    uint32 internal constant MAX_SUB = 0x007FFFFF; // (2^23 - 1) * 2^-149
    uint32 internal constant MIN_NORMAL = 0x00800000; // 2^-126
    uint32 internal constant ONE = 0x3F800000;
    uint32 internal constant NEG_ONE = 0xBF800000;
    uint32 internal constant HALF = 0x3F000000;
    uint32 internal constant TWO = 0x40000000;
    uint32 internal constant THREE = 0x40400000;
    uint32 internal constant MAX = 0x7F7FFFFF; // (2^24 - 1) * 2^104
    uint32 internal constant INF = 0x7F800000;
    uint32 internal constant NINF = 0xFF800000;
    uint32 internal constant QNAN = 0x7FC00000;
    uint32 internal constant SNAN = 0x7F800001;
    uint32 internal constant NEG_NAN = 0xFFC00001;

    Binary32Harness internal h;

    function setUp() public {
        h = new Binary32Harness();
    }

    function _eq(uint32 got, uint32 want, string memory what) internal pure {
        assertEq(uint256(got), uint256(want), what);
    }

    // ------------------------------------------------------------------ add / sub: zeros

    function test_add_signedZeros() public pure {
        _eq(PZERO.add(PZERO), PZERO, "+0 + +0 = +0");
        _eq(PZERO.add(NZERO), PZERO, "+0 + -0 = +0");
        _eq(NZERO.add(PZERO), PZERO, "-0 + +0 = +0");
        _eq(NZERO.add(NZERO), NZERO, "-0 + -0 = -0");
        _eq(NZERO.sub(PZERO), NZERO, "-0 - +0 = -0");
        _eq(PZERO.sub(PZERO), PZERO, "+0 - +0 = +0");
        _eq(ONE.add(NZERO), ONE, "1 + -0 = 1");
        _eq(NZERO.add(MIN_SUB ^ 0x80000000), 0x80000001, "-0 + -min_sub = -min_sub");
    }

    function test_add_exactCancellationIsPositiveZero() public pure {
        _eq(ONE.add(NEG_ONE), PZERO, "1 + -1 = +0");
        _eq(NEG_ONE.add(ONE), PZERO, "-1 + 1 = +0");
        _eq(NEG_ONE.sub(NEG_ONE), PZERO, "-1 - -1 = +0");
        _eq(uint32(0x80000001).add(MIN_SUB), PZERO, "-min_sub + min_sub = +0");
        _eq(MAX.sub(MAX), PZERO, "max - max = +0");
    }

    // ------------------------------------------------------------------ add / sub: subnormals

    function test_add_subnormals() public pure {
        // 2^-149 + 2^-149 = 2 * 2^-149: exact, still subnormal.
        _eq(MIN_SUB.add(MIN_SUB), 0x00000002, "min_sub + min_sub");
        // (2^23 - 1) * 2^-149 + 2^-149 = 2^23 * 2^-149 = 2^-126: carries into the exponent field.
        _eq(MAX_SUB.add(MIN_SUB), MIN_NORMAL, "max_sub + min_sub = min_normal");
        // 2^-126 - 2^-149 = (2^23 - 1) * 2^-149: normal to subnormal.
        _eq(MIN_NORMAL.sub(MIN_SUB), MAX_SUB, "min_normal - min_sub = max_sub");
        // 2 * (2^23 - 1) * 2^-149 = (2^23 + 2^23 - 2) * 2^-149: exponent field 1, fraction 2^23 - 2.
        _eq(MAX_SUB.add(MAX_SUB), 0x00FFFFFE, "max_sub + max_sub");
        // 1.5 * 2^-126 - 2^-126 = 2^-127 = 2^22 * 2^-149 (cancellation into the subnormal range).
        _eq(uint32(0x00C00000).sub(MIN_NORMAL), 0x00400000, "1.5 min_normal - min_normal");
    }

    // ------------------------------------------------------------------ add / sub: rounding

    function test_add_tiesToEven() public pure {
        // 1 + 2^-24 lies half-way between 1 (fraction 0, even) and 1 + 2^-23 (odd): down to 1.
        _eq(ONE.add(0x33800000), ONE, "1 + 2^-24 ties down to even");
        // (1 + 2^-23) + 2^-24: half-way between fraction 1 (odd) and 2 (even): up.
        _eq(uint32(0x3F800001).add(0x33800000), 0x3F800002, "(1 + 2^-23) + 2^-24 ties up to even");
        // 1 + 2^-24 (1 + 2^-23): just above half-way: up.
        _eq(ONE.add(0x33800001), 0x3F800001, "1 + (2^-24 + 2^-47) rounds up");
        // Below 1 the ulp halves: 1 - 2^-25 is half-way between 1 - 2^-24 (fraction all ones, odd)
        // and 1 (even): up to 1. Slightly more than 2^-25 goes down to 1 - 2^-24.
        _eq(ONE.sub(0x33000000), ONE, "1 - 2^-25 ties up to 1");
        _eq(ONE.sub(0x33000001), 0x3F7FFFFF, "1 - (2^-25 + 2^-48) rounds down");
        // (2^24 - 1) * 2^104 + 2^103 ties between max (odd) and 2^128 (even): overflows to inf.
        _eq(MAX.add(0x73000000), INF, "max + ulp/2 ties to 2^128 = inf");
        // A quarter ulp stays below the tie.
        _eq(MAX.add(0x72800000), MAX, "max + ulp/4 = max");
        // 2^24 + 1 ties between 2^24 (even) and 2^24 + 2: down; 2^24 + 3 ties up to 2^24 + 4.
        _eq(uint32(0x4B800000).add(ONE), 0x4B800000, "2^24 + 1 = 2^24");
        _eq(uint32(0x4B800001).add(ONE), 0x4B800002, "(2^24 + 2) + 1 = 2^24 + 4");
    }

    function test_add_operandShiftedOut() public pure {
        // The smallest subnormal is far below half an ulp of 1 (2^-24 below, 2^-23 above).
        _eq(ONE.add(MIN_SUB), ONE, "1 + min_sub = 1");
        _eq(ONE.sub(MIN_SUB), ONE, "1 - min_sub = 1");
        _eq(MAX.add(ONE), MAX, "max + 1 = max");
        _eq(NINF.add(0), NINF, "-inf + 0 = -inf");
        // Exponent gap 26: 1 - (2^-25 - 2^-49) stays above the tie point 1 - 2^-25: rounds to 1.
        _eq(ONE.sub(0x32FFFFFF), ONE, "1 - just under 2^-25 = 1");
        // 1.5 + 2^-25 * 1.99..: below half an ulp (2^-24) of 1.5: stays.
        _eq(uint32(0x3FC00000).add(0x32FFFFFF), 0x3FC00000, "1.5 + just under 2^-24 = 1.5");
    }

    function test_add_cancellation() public pure {
        // (1 + 2^-23) - 1 = 2^-23 exactly.
        _eq(uint32(0x3F800001).sub(ONE), 0x34000000, "(1 + 2^-23) - 1 = 2^-23");
        // 1 - (1 - 2^-24) = 2^-24.
        _eq(ONE.sub(0x3F7FFFFF), 0x33800000, "1 - (1 - 2^-24) = 2^-24");
        // -(2^-125) + 1.5 * 2^-126 = -2^-127 (subnormal result, negative).
        _eq(uint32(0x81000000).add(0x00C00000), 0x80400000, "-2^-125 + 1.5 * 2^-126 = -2^-127");
    }

    function test_add_overflow() public pure {
        _eq(MAX.add(MAX), INF, "max + max = inf");
        _eq(uint32(0xFF7FFFFF).add(0xFF7FFFFF), NINF, "-max + -max = -inf");
        _eq(MAX.sub(0xFF7FFFFF), INF, "max - (-max) = inf");
    }

    function test_add_infAndNaN() public pure {
        _eq(INF.add(NINF), QNAN, "inf + -inf = NaN");
        _eq(INF.sub(INF), QNAN, "inf - inf = NaN");
        _eq(INF.add(INF), INF, "inf + inf = inf");
        _eq(NINF.sub(INF), NINF, "-inf - inf = -inf");
        _eq(INF.add(0xFF7FFFFF), INF, "inf + -max = inf");
        _eq(ONE.sub(INF), NINF, "1 - inf = -inf");
        _eq(QNAN.add(ONE), QNAN, "NaN + 1 = NaN");
        _eq(ONE.add(SNAN), QNAN, "1 + sNaN = canonical qNaN");
        _eq(NEG_NAN.sub(INF), QNAN, "-NaN - inf = canonical qNaN");
        _eq(INF.add(NEG_NAN), QNAN, "inf + -NaN = canonical qNaN");
    }

    // ------------------------------------------------------------------ mul

    function test_mul_signsAndZeros() public pure {
        _eq(PZERO.mul(NEG_ONE), NZERO, "+0 * -1 = -0");
        _eq(NZERO.mul(NZERO), PZERO, "-0 * -0 = +0");
        _eq(NZERO.mul(MAX), NZERO, "-0 * max = -0");
        _eq(NEG_ONE.mul(NEG_ONE), ONE, "-1 * -1 = 1");
        _eq(THREE.mul(NEG_ONE), 0xC0400000, "3 * -1 = -3");
    }

    function test_mul_infAndNaN() public pure {
        _eq(PZERO.mul(INF), QNAN, "0 * inf = NaN");
        _eq(NINF.mul(NZERO), QNAN, "-inf * -0 = NaN");
        _eq(INF.mul(0xC0000000), NINF, "inf * -2 = -inf");
        _eq(NINF.mul(NINF), INF, "-inf * -inf = inf");
        _eq(INF.mul(MIN_SUB), INF, "inf * min_sub = inf");
        _eq(SNAN.mul(ONE), QNAN, "sNaN * 1 = canonical qNaN");
        _eq(PZERO.mul(NEG_NAN), QNAN, "0 * NaN = NaN");
    }

    function test_mul_overflowAndUnderflow() public pure {
        _eq(MAX.mul(TWO), INF, "max * 2 = inf");
        _eq(MAX.mul(0xC0000000), NINF, "max * -2 = -inf");
        _eq(MAX.mul(ONE), MAX, "max * 1 = max");
        _eq(MAX.mul(HALF), 0x7EFFFFFF, "max * 0.5");
        // 2^-126 * 0.5 = 2^-127: a subnormal result (2^22 * 2^-149).
        _eq(MIN_NORMAL.mul(HALF), 0x00400000, "min_normal * 0.5");
        // 2^-149 * 0.5 = 2^-150: half-way between 0 (even) and 2^-149 (odd): 0, with the sign.
        _eq(MIN_SUB.mul(HALF), PZERO, "min_sub * 0.5 ties to +0");
        _eq(uint32(0x80000001).mul(HALF), NZERO, "-min_sub * 0.5 ties to -0");
        // 3 * 2^-149 * 0.5 = 1.5 * 2^-149: between 1 (odd) and 2 (even): up to 2 * 2^-149.
        _eq(uint32(0x00000003).mul(HALF), 0x00000002, "3 min_sub * 0.5 ties to 2 min_sub");
        // 0.75 * 2^-149: above half-way: 2^-149; 0.25 * 2^-149: below: 0.
        _eq(MIN_SUB.mul(0x3F400000), MIN_SUB, "min_sub * 0.75 = min_sub");
        _eq(MIN_SUB.mul(0x3E800000), PZERO, "min_sub * 0.25 = 0");
        // Subnormal to normal: 2 (2^23 - 1) 2^-149 = exponent field 1, fraction 2^23 - 2.
        _eq(MAX_SUB.mul(TWO), 0x00FFFFFE, "max_sub * 2");
        // 2^-75 * 2^-75 = 2^-150: tie to 0. 2^-75 * 2^-74 = 2^-149.
        _eq(uint32(0x1A000000).mul(0x1A000000), PZERO, "2^-75 * 2^-75 = 0");
        _eq(uint32(0x1A000000).mul(0x1A800000), MIN_SUB, "2^-75 * 2^-74 = min_sub");
    }

    function test_mul_tiesToEven() public pure {
        // 4097 = 0x45800800, 4099 = 0x45801800. 4097^2 = 2^24 + 2^13 + 1: 25 bits, ends in 1: a tie
        // between 2^24 + 2^13 (24-bit significand 2^23 + 2^12, even) and + 2: down.
        _eq(uint32(0x45800800).mul(0x45800800), 0x4B801000, "4097^2 ties down to even");
        // 4097 * 4099 = 4098^2 - 1 = 2^24 + 2^14 + 3: tie between significands 2^23 + 2^13 + 1 (odd)
        // and 2^23 + 2^13 + 2 (even): up to 2^24 + 2^14 + 4 = 0x4B802002.
        _eq(uint32(0x45800800).mul(0x45801800), 0x4B802002, "4097 * 4099 ties up to even");
        // (1 + 2^-23)^2 = 1 + 2^-22 + 2^-46: rounds to 1 + 2^-22.
        _eq(uint32(0x3F800001).mul(0x3F800001), 0x3F800002, "(1 + 2^-23)^2");
    }

    // ------------------------------------------------------------------ div

    function test_div_specials() public pure {
        _eq(ONE.div(PZERO), INF, "1 / +0 = inf");
        _eq(ONE.div(NZERO), NINF, "1 / -0 = -inf");
        _eq(NEG_ONE.div(PZERO), NINF, "-1 / +0 = -inf");
        _eq(MIN_SUB.div(PZERO), INF, "min_sub / 0 = inf");
        _eq(PZERO.div(PZERO), QNAN, "0 / 0 = NaN");
        _eq(NZERO.div(PZERO), QNAN, "-0 / 0 = NaN");
        _eq(INF.div(NINF), QNAN, "inf / -inf = NaN");
        _eq(INF.div(PZERO), INF, "inf / 0 = inf");
        _eq(NINF.div(TWO), NINF, "-inf / 2 = -inf");
        _eq(PZERO.div(THREE), PZERO, "0 / 3 = 0");
        _eq(NZERO.div(THREE), NZERO, "-0 / 3 = -0");
        _eq(PZERO.div(NEG_ONE), NZERO, "0 / -1 = -0");
        _eq(ONE.div(INF), PZERO, "1 / inf = 0");
        _eq(NEG_ONE.div(INF), NZERO, "-1 / inf = -0");
        _eq(ONE.div(NINF), NZERO, "1 / -inf = -0");
        _eq(QNAN.div(ONE), QNAN, "NaN / 1 = NaN");
        _eq(ONE.div(SNAN), QNAN, "1 / sNaN = canonical qNaN");
    }

    function test_div_rounding() public pure {
        // 1/3 = 0.0101...b: fraction 0x2AAAAA then 1010..: above half: up -> 0x3EAAAAAB.
        _eq(ONE.div(THREE), 0x3EAAAAAB, "1 / 3");
        _eq(TWO.div(THREE), 0x3F2AAAAB, "2 / 3");
        _eq(THREE.div(TWO), 0x3FC00000, "3 / 2 = 1.5");
        _eq(MAX.div(TWO), 0x7EFFFFFF, "max / 2");
        _eq(MAX.div(HALF), INF, "max / 0.5 = inf");
        _eq(MAX.div(MIN_SUB), INF, "max / min_sub = inf");
    }

    function test_div_subnormalResults() public pure {
        _eq(MIN_NORMAL.div(TWO), 0x00400000, "min_normal / 2 = 2^-127");
        _eq(MIN_SUB.div(TWO), PZERO, "min_sub / 2 ties to 0");
        _eq(uint32(0x00000003).div(TWO), 0x00000002, "3 min_sub / 2 ties to 2 min_sub");
        _eq(uint32(0x00000003).div(0xC0000000), 0x80000002, "3 min_sub / -2 ties to -2 min_sub");
        // 2^-126 / 2^24 = 2^-150: tie to 0.
        _eq(MIN_NORMAL.div(0x4B800000), PZERO, "min_normal / 2^24 = 0");
        // 1 / max = 2^-128 (1 + 2^-24 + ...) = (2^21 + 2^-3 + ...) * 2^-149: rounds to 2^21 * 2^-149.
        _eq(ONE.div(MAX), 0x00200000, "1 / max");
        _eq(MAX_SUB.div(ONE), MAX_SUB, "max_sub / 1");
        // (2^23 - 1) 2^-149 / (2^23 - 1) 2^-149 = 1.
        _eq(MAX_SUB.div(MAX_SUB), ONE, "max_sub / max_sub = 1");
        // 2^-126 / 2^-149 = 2^23.
        _eq(MIN_NORMAL.div(MIN_SUB), 0x4B000000, "min_normal / min_sub = 2^23");
        // 2^-149 / ((2^24 - 1) 2^-124) = 2^-49 (1 + 2^-24 + 2^-48 + ...): just above the midpoint
        // 2^-49 (1 + 2^-24), so up to 2^-49 (1 + 2^-23). The 41-bit truncated quotient of the
        // significands, 2^40 + 2^16, looks exactly like a tie: only the remainder (sticky) decides.
        _eq(MIN_SUB.div(0x0D7FFFFF), 0x27000001, "quotient just above a tie (sticky)");
    }

    // ------------------------------------------------------------------ conversions, order

    function test_fromUint() public pure {
        _eq(Binary32.fromUint(0), PZERO, "0");
        _eq(Binary32.fromUint(1), ONE, "1");
        _eq(Binary32.fromUint(3), THREE, "3");
        _eq(Binary32.fromUint(64), 0x42800000, "64 = 2^6");
        _eq(Binary32.fromUint((1 << 24) - 1), 0x4B7FFFFF, "2^24 - 1");
        _eq(Binary32.fromUint(1 << 24), 0x4B800000, "2^24");
    }

    function test_fromUint_revertsAbove2pow24() public {
        vm.expectRevert(abi.encodeWithSelector(Binary32.Binary32__UintTooLarge.selector, (1 << 24) + 1));
        h.fromUint((1 << 24) + 1);
    }

    function testFuzz_fromUintIsExact(uint256 n) public pure {
        n = bound(n, 1, 1 << 24);
        uint32 u = Binary32.fromUint(n);
        // Decode: value = (2^23 + fraction) * 2^(exponent - 150), an integer here (exponent >= 127).
        uint256 e = (u >> 23) & 0xFF;
        uint256 sig = (u & 0x7FFFFF) | 0x800000;
        uint256 v = e >= 150 ? sig << (e - 150) : sig >> (150 - e);
        assertEq(v, n, "fromUint decodes back to n");
        assertEq(sig & ((1 << (e >= 150 ? 0 : 150 - e)) - 1), 0, "no fraction bits below 1");
    }

    function test_totalOrder() public pure {
        assertEq(uint256(int256(NZERO.totalOrderKey()) + 1), 0, "key(-0) = -1");
        assertEq(uint256(int256(PZERO.totalOrderKey())), 0, "key(+0) = 0");
        assertTrue(NZERO.lt(PZERO), "-0 < +0");
        assertTrue(!PZERO.lt(NZERO), "not +0 < -0");
        assertTrue(NINF.lt(0xFF7FFFFF), "-inf < -max");
        assertTrue(uint32(0xFF7FFFFF).lt(NEG_ONE), "-max < -1");
        assertTrue(NEG_ONE.lt(0x80000001), "-1 < -min_sub");
        assertTrue(uint32(0x80000001).lt(NZERO), "-min_sub < -0");
        assertTrue(PZERO.lt(MIN_SUB), "+0 < min_sub");
        assertTrue(MAX_SUB.lt(MIN_NORMAL), "max_sub < min_normal");
        assertTrue(MAX.lt(INF), "max < inf");
        assertTrue(!ONE.lt(ONE), "not 1 < 1");
    }

    function test_classify() public pure {
        assertTrue(MAX.isFinite() && PZERO.isFinite() && MIN_SUB.isFinite(), "finite");
        assertTrue(!INF.isFinite() && !NINF.isFinite() && !QNAN.isFinite(), "not finite");
        assertTrue(QNAN.isNaN() && SNAN.isNaN() && NEG_NAN.isNaN(), "NaN");
        assertTrue(!INF.isNaN() && !NINF.isNaN() && !MAX.isNaN(), "not NaN");
    }

    // ------------------------------------------------------------------ fuzzed identities (bit-exact)

    function testFuzz_addCommutes(uint32 a, uint32 b) public pure {
        _eq(a.add(b), b.add(a), "a + b = b + a");
    }

    function testFuzz_mulCommutes(uint32 a, uint32 b) public pure {
        _eq(a.mul(b), b.mul(a), "a * b = b * a");
    }

    function testFuzz_addNegationIsPositiveZero(uint32 x) public pure {
        vm.assume(x.isFinite());
        _eq(x.add(x ^ 0x80000000), PZERO, "x + (-x) = +0");
        _eq(x.sub(x), PZERO, "x - x = +0");
    }

    function testFuzz_mulByOne(uint32 x) public pure {
        _eq(x.mul(ONE), x.isNaN() ? QNAN : x, "x * 1 = x");
    }

    function testFuzz_divByOne(uint32 x) public pure {
        _eq(x.div(ONE), x.isNaN() ? QNAN : x, "x / 1 = x");
    }

    function testFuzz_subIsAddOfNegation(uint32 x, uint32 y) public pure {
        _eq(x.sub(y), x.add(y ^ 0x80000000), "x - y = x + (-y)");
    }

    /// x + x and x * 2 are both the single rounding of the exact 2x (overflow included).
    function testFuzz_doublingAgrees(uint32 x) public pure {
        _eq(x.add(x), x.mul(TWO), "x + x = x * 2");
    }

    /// x / 2 and x * 0.5 are both the single rounding of the exact x / 2 (subnormal ties included).
    function testFuzz_halvingAgrees(uint32 x) public pure {
        _eq(x.div(TWO), x.mul(HALF), "x / 2 = x * 0.5");
    }

    /// A nonzero finite x divided by itself is exactly 1; x * (1/x) need not be.
    function testFuzz_divBySelf(uint32 x) public pure {
        vm.assume(x.isFinite() && x & 0x7FFFFFFF != 0);
        _eq(x.div(x), ONE, "x / x = 1");
    }

    /// Subnormal sums are exact (no rounding below 2^-126): the integer sum of the patterns.
    function testFuzz_subnormalAddIsExact(uint32 a, uint32 b) public pure {
        a = uint32(bound(a, 0, MAX_SUB));
        b = uint32(bound(b, 0, MAX_SUB));
        _eq(a.add(b), a + b, "subnormal a + b");
        if (a >= b) _eq(a.sub(b), a - b, "subnormal a - b");
    }

    // ------------------------------------------------------------------ referee: hand-derived

    function _arr(uint32 a, uint32 b, uint32 c) internal pure returns (uint32[] memory xs) {
        xs = new uint32[](3);
        (xs[0], xs[1], xs[2]) = (a, b, c);
    }

    function test_mean() public pure {
        // (1 + 2 + 4) / 3 = 7/3 = 10.0101..b: fraction 0x155555, next bit 0: 0x40155555.
        _eq(Referee.mean(_arr(ONE, TWO, 0x40800000)), 0x40155555, "mean(1, 2, 4) = 7/3");
        // Order matters: 2^24 + 1 + 1 = 2^24 (each +1 ties to even), / 3 = 5592405.33 -> 5592405.5
        // (ulp 0.5): 0x4AAAAAAB; 1 + 1 + 2^24 = 2^24 + 2 exactly, / 3 = 5592406 = 0x4AAAAAAC.
        _eq(Referee.mean(_arr(0x4B800000, ONE, ONE)), 0x4AAAAAAB, "mean(2^24, 1, 1)");
        _eq(Referee.mean(_arr(ONE, ONE, 0x4B800000)), 0x4AAAAAAC, "mean(1, 1, 2^24)");
        // acc starts at +0: the mean of a single -0 is (+0 + -0) / 1 = +0.
        uint32[] memory one = new uint32[](1);
        one[0] = NZERO;
        _eq(Referee.mean(one), PZERO, "mean(-0) = +0");
        // Intermediate overflow propagates: max + max = inf, + (-max) = inf.
        _eq(Referee.mean(_arr(MAX, MAX, 0xFF7FFFFF)), INF, "mean overflows to inf");
    }

    function test_trimmedMean() public pure {
        uint32[] memory xs = new uint32[](5);
        // 5, -100, 1, 3, 1000 (trainer order)
        (xs[0], xs[1], xs[2], xs[3], xs[4]) = (0x40A00000, 0xC2C80000, ONE, THREE, 0x447A0000);
        // 20 %: b = 1, sorted middle 1, 3, 5: 9 / 3 = 3.
        _eq(Referee.trimmedMean(xs, 2000), THREE, "trim 1 of 5");
        // 40 %: b = 2: the middle value 3.
        _eq(Referee.trimmedMean(xs, 4000), THREE, "trim 2 of 5");
        // 0 %: the mean in sorted order: (-100 + 1 + 3 + 5 + 1000) / 5 = 909 / 5 = 181.8 ->
        // 181.8 = 10110101.110011001100..b: fraction 0x35CCCC|CC.. -> rounds up to 0x4335CCCD.
        _eq(Referee.trimmedMean(xs, 0), 0x4335CCCD, "trim 0 of 5");
        // The caller's array is not reordered.
        _eq(xs[0], 0x40A00000, "input untouched");
        _eq(xs[4], 0x447A0000, "input untouched");
        // Sorted order puts -0 before +0: (-0) then (+0): acc = +0 + -0 + +0 = +0.
        uint32[] memory z = new uint32[](2);
        (z[0], z[1]) = (PZERO, NZERO);
        _eq(Referee.trimmedMean(z, 0), PZERO, "signed zeros");
    }

    function test_trimmedMean_sumsInSortedOrder() public pure {
        // Trainer order 1, 2^24, 1; sorted 1, 1, 2^24: 2 + 2^24 = 2^24 + 2 exact, / 3 = 0x4AAAAAAC
        // (summing in trainer order would give 0x4AAAAAAB, see test_mean).
        _eq(Referee.trimmedMean(_arr(ONE, 0x4B800000, ONE), 0), 0x4AAAAAAC, "sorted order");
    }

    function test_coordinateMedian() public pure {
        _eq(Referee.coordinateMedian(_arr(THREE, ONE, TWO)), TWO, "median(3, 1, 2) = 2");
        uint32[] memory xs = new uint32[](4);
        (xs[0], xs[1], xs[2], xs[3]) = (0x40800000, ONE, THREE, TWO); // 4, 1, 3, 2
        _eq(Referee.coordinateMedian(xs), 0x40200000, "median(4, 1, 3, 2) = 2.5");
        _eq(Referee.coordinateMedian(_arr(PZERO, NZERO, NZERO)), NZERO, "sorted -0, -0, +0: -0");
        uint32[] memory two = new uint32[](2);
        (two[0], two[1]) = (MAX, MAX);
        _eq(Referee.coordinateMedian(two), INF, "(max + max) / 2 = inf: the sum is rounded first");
        (two[0], two[1]) = (MIN_SUB, 0x00000002);
        _eq(Referee.coordinateMedian(two), 0x00000002, "(1 + 2) min_sub / 2 ties to 2 min_sub");
    }

    function test_aggregateDispatchAndReverts() public {
        uint32[] memory xs = _arr(THREE, ONE, TWO);
        _eq(Referee.aggregate(0, xs, 0), 0x40000000, "rule 0: mean 2");
        _eq(Referee.aggregate(1, xs, 3333), TWO, "rule 1: b = 0 (3 * 3333 / 10000 = 0): mean 2");
        _eq(Referee.aggregate(2, xs, 0), TWO, "rule 2: median 2");

        uint32[] memory values = new uint32[](3);
        (values[0], values[1], values[2]) = (THREE, ONE, TWO);
        uint32[] memory counts = new uint32[](1);
        counts[0] = 3;
        vm.expectRevert(abi.encodeWithSelector(Referee.Referee__RuleNotProvable.selector, uint8(3)));
        h.aggregateBatch(3, values, counts, 0);
        vm.expectRevert(abi.encodeWithSelector(Referee.Referee__UnknownRule.selector, uint8(4)));
        h.aggregateBatch(4, values, counts, 0);
        // b = floor(3 * 3334 / 10000) = 1, 2b = 2 < 3: fine; 6667 bps: b = 2, 2b = 4 >= 3: revert.
        _eq(h.aggregateBatch(1, values, counts, 3334)[0], TWO, "b = 1 of 3: the middle value");
        vm.expectRevert(abi.encodeWithSelector(Referee.Referee__TrimTooLarge.selector, 3, uint16(6667), 2));
        h.aggregateBatch(1, values, counts, 6667);
        counts[0] = 0;
        for (uint8 rule = 0; rule < 3; ++rule) {
            vm.expectRevert(abi.encodeWithSelector(Referee.Referee__NoValues.selector));
            h.aggregateBatch(rule, new uint32[](0), counts, 0);
        }
    }

    function test_nesterov() public pure {
        // p = 1, m = +0, g = 1, lr = 0.5, mu = 0.5: m' = 0.5 * 0 + 1 = 1; u = 1 + 0.5 * 1 = 1.5;
        // p' = 1 - 0.5 * 1.5 = 0.25. Without Nesterov: u = m' = 1, p' = 0.5.
        (uint32 p, uint32 m) = Referee.nesterov(ONE, PZERO, ONE, HALF, HALF, true);
        _eq(p, 0x3E800000, "nesterov p' = 0.25");
        _eq(m, ONE, "nesterov m' = 1");
        (p, m) = Referee.nesterov(ONE, PZERO, ONE, HALF, HALF, false);
        _eq(p, HALF, "heavy-ball p' = 0.5");
        _eq(m, ONE, "heavy-ball m' = 1");
        // No submission (g = +0), momentum 2: m' = 0.5 * 2 + 0 = 1, u = 0 + 0.5 = 0.5, p' = 1 - 0.25.
        (p, m) = Referee.nesterov(ONE, TWO, PZERO, HALF, HALF, true);
        _eq(p, 0x3F400000, "g = 0: p' = 0.75");
        _eq(m, ONE, "g = 0: m' = 1");
    }

    // ------------------------------------------------------------------ referee: fuzzed

    function testFuzz_sortedCopyIsSortedPermutation(uint256 seed, uint8 len) public pure {
        uint256 n = bound(len, 0, 64);
        uint32[] memory xs = _randomValues(seed, n, true);
        uint32[] memory s = Referee.sortedCopy(xs);
        assertEq(s.length, n, "length");
        for (uint256 i = 1; i < n; ++i) {
            assertTrue(!s[i].lt(s[i - 1]), "ascending in totalOrder");
        }
        // Permutation: every input occurs in s as often as in xs.
        for (uint256 i = 0; i < n; ++i) {
            uint256 inX;
            uint256 inS;
            for (uint256 j = 0; j < n; ++j) {
                if (xs[j] == xs[i]) ++inX;
                if (s[j] == xs[i]) ++inS;
            }
            assertEq(inS, inX, "same multiset");
        }
    }

    function testFuzz_medianOfOddIsAnInput(uint256 seed, uint8 len) public pure {
        uint256 n = 2 * bound(len, 0, 31) + 1;
        uint32[] memory xs = _randomValues(seed, n, false);
        uint32 med = Referee.coordinateMedian(xs);
        uint256 below;
        uint256 above;
        for (uint256 i = 0; i < n; ++i) {
            if (xs[i].lt(med)) ++below;
            if (med.lt(xs[i])) ++above;
        }
        assertTrue(below <= n / 2 && above <= n / 2, "half below, half above");
    }

    function testFuzz_fullTrimIsTheMedian(uint256 seed, uint8 len) public pure {
        // Odd n with 2b = n - 1 leaves the one middle value: TrimmedMean = median (x / 1 = x).
        uint256 n = 2 * bound(len, 0, 31) + 1;
        uint32[] memory xs = _randomValues(seed, n, false);
        uint16 alpha = uint16(((n / 2) * 10000 + n - 1) / n); // smallest alpha with b = (n-1)/2
        _eq(Referee.trimmedMean(xs, alpha), Referee.coordinateMedian(xs), "trim (n-1)/2 = median");
    }

    // ------------------------------------------------------------------ gas

    /// Gas of one operation as an internal call (the way Referee and ChunkMerkle use it), average
    /// over 256 operand pairs of nearby magnitude (exponents within 8 of each other, the usual
    /// case for gradients; no fast path) minus the same loop without the operation.
    function test_gas_primitiveOps() public {
        uint256 base = _opLoopGas(255);
        string[4] memory names = ["gas: add", "gas: sub", "gas: mul", "gas: div"];
        for (uint8 op = 0; op < 4; ++op) {
            uint256 g = (_opLoopGas(op) - base) / 256;
            emit log_named_uint(names[op], g);
            assertTrue(g < 1200, "an operation costs under 1,200 gas");
        }
    }

    /// Gas of Referee.aggregate (values already in memory) at K = 8, 32, 64 on gradient-like
    /// values, and of one Nesterov step.
    function test_gas_referee() public {
        uint256[3] memory ks = [uint256(8), 32, 64];
        string[3] memory rules = ["Mean", "TrimmedMean(10%)", "CoordinateMedian"];
        for (uint256 r = 0; r < 3; ++r) {
            for (uint256 i = 0; i < 3; ++i) {
                uint32[] memory xs = _randomValues(uint256(keccak256(abi.encode(r, i))), ks[i], false);
                uint256 g0 = gasleft();
                uint32 out = Referee.aggregate(uint8(r), xs, 1000);
                uint256 g = g0 - gasleft();
                require(out != 1, "keep the result alive");
                emit log_named_uint(string.concat("gas: ", rules[r], ", K = ", _k(ks[i])), g);
                assertTrue(g < 200_000, "a coordinate costs under 200k gas at K <= 64");
            }
        }
        uint256 g1 = gasleft();
        (uint32 p, uint32 m) = Referee.nesterov(ONE, 0x3C23D70A, 0xBA83126F, 0x3F333333, 0x3F666666, true);
        g1 -= gasleft();
        require(p != 0 && m != 0, "keep the result alive"); // else via-IR drops the pure call
        emit log_named_uint("gas: nesterov step", g1);
    }

    // ------------------------------------------------------------------ helpers

    /// Gas of `n` operations `op` (255: the loop alone, a ^ b) on operands prepared beforehand.
    function _opLoopGas(uint8 op) internal view returns (uint256 used) {
        uint256 n = 256;
        uint32[] memory a = new uint32[](n);
        uint32[] memory b = new uint32[](n);
        for (uint256 i = 0; i < n; ++i) {
            uint256 r = uint256(keccak256(abi.encode(i)));
            (a[i], b[i]) = (_near(r, 127), _near(r >> 64, 127));
        }
        uint32 acc;
        uint256 g0 = gasleft();
        if (op == 0) for (uint256 i = 0; i < n; ++i) acc ^= a[i].add(b[i]);
        else if (op == 1) for (uint256 i = 0; i < n; ++i) acc ^= a[i].sub(b[i]);
        else if (op == 2) for (uint256 i = 0; i < n; ++i) acc ^= a[i].mul(b[i]);
        else if (op == 3) for (uint256 i = 0; i < n; ++i) acc ^= a[i].div(b[i]);
        else for (uint256 i = 0; i < n; ++i) acc ^= a[i] ^ b[i];
        used = g0 - gasleft();
        require(acc != 1, "keep acc alive");
    }

    /// A finite value with random sign and fraction and an exponent within 8 of `center`.
    function _near(uint256 r, uint256 center) internal pure returns (uint32) {
        uint256 e = center - 4 + ((r >> 32) % 8);
        return uint32(((r >> 40) & 1) << 31 | e << 23 | (r & 0x7FFFFF));
    }

    /// n values from `seed`: gradient-like (exponents 110..129, both signs); with `wild`, also
    /// ±0, repeats, subnormals and any finite exponent.
    function _randomValues(uint256 seed, uint256 n, bool wild) internal pure returns (uint32[] memory xs) {
        xs = new uint32[](n);
        for (uint256 i = 0; i < n; ++i) {
            uint256 r = uint256(keccak256(abi.encode(seed, i)));
            uint256 kind = wild ? r % 5 : 0;
            if (kind == 0) xs[i] = _near(r >> 8, 120) ^ uint32(((r >> 100) % 3) << 23);
            else if (kind == 1) xs[i] = uint32(((r >> 8) % 2) << 31); // ±0
            else if (kind == 2) xs[i] = i > 0 ? xs[(r >> 8) % i] : 0; // a repeat
            else if (kind == 3) xs[i] = uint32((r >> 8) & 0x807FFFFF); // subnormal
            else xs[i] = uint32(((r >> 8) & 0x80000000) | ((((r >> 40) % 255) << 23)) | ((r >> 8) & 0x7FFFFF));
        }
    }

    function _k(uint256 k) internal pure returns (string memory) {
        return k == 8 ? "8" : k == 32 ? "32" : "64";
    }
}
