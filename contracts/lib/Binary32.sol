// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

/// @title Binary32
/// @notice IEEE-754 binary32 (float32) arithmetic on bit patterns held as `uint32`: the
/// canonical arithmetic of protocol v2 (contracts/PROTOCOL.md §1). Each of `add`, `sub`, `mul`
/// and `div` is exactly one IEEE-754 operation, correctly rounded to nearest with ties to
/// even, with full subnormal support (no flush to zero), signed zeros, infinities, and
/// overflow to ±inf, so that it agrees bit for bit with any conforming float32 unit (numpy,
/// torch on CPU, CUDA without fused multiply-add).
///
/// @dev Method (IEEE 754-2019 §4.3, §6, §7; the construction of Berkeley SoftFloat's
/// `roundPackToF32`): each finite operand is split into an integer significand `s` and an
/// exponent so that its value is `s * 2^(e - 150)` (`e` = biased exponent, 1 for subnormals;
/// `s` has the hidden bit for normals). The exact result of the operation is formed as an
/// integer `m * 2^t` in 256-bit arithmetic (exact for add and mul; for div the quotient carries
/// 41+ bits and a sticky bit jammed into its lowest bit), then `roundPack` rounds it once. The
/// core is one assembly block (`_arith`): Solidity's checked arithmetic, uint32 clean-ups and
/// internal calls cost more than the operation itself.
///
/// NaN: every NaN result is the canonical quiet NaN `0x7FC00000`; payload and sign bits of NaN
/// inputs are not preserved (IEEE 754 leaves them unspecified; the protocol rejects NaN inputs
/// before aggregation, PROTOCOL.md §4).
///
/// Gas per operation as an internal call, averaged over 256 random operand pairs of nearby
/// magnitude (the full path; `tests/forge/Binary32.t.sol::test_gas_primitiveOps`, solc 0.8.28,
/// optimizer 200 runs, cancun): add 968, sub 975, mul 837, div 860 (legacy pipeline, as forge
/// builds); add 773, sub 828, mul 631, div 611 (via-IR, as ape builds the registry). An add whose
/// operands are 26+ binades apart, and every inf / NaN / zero case, take a shorter path.
library Binary32 {
    // ---------------------------------------------------------------- errors

    /// @notice `fromUint(n)` with n > 2^24: n is not always exactly representable in binary32.
    /// @param n the integer given.
    error Binary32__UintTooLarge(uint256 n);

    // ---------------------------------------------------------------- constants

    /// @notice The canonical quiet NaN returned for every NaN result.
    uint32 internal constant QNAN = 0x7FC00000;
    /// @notice +infinity.
    uint32 internal constant POS_INF = 0x7F800000;
    /// @notice The sign bit.
    uint32 internal constant SIGN = 0x80000000;
    /// @notice 1.0f.
    uint32 internal constant ONE = 0x3F800000;
    /// @notice 2.0f.
    uint32 internal constant TWO = 0x40000000;

    // ---------------------------------------------------------------- arithmetic

    /// @notice fl(a + b): one IEEE-754 binary32 addition, round to nearest, ties to even.
    /// @dev Zero results: an exact zero sum of operands of opposite sign is +0; (-0) + (-0) = -0.
    /// inf + (-inf) = NaN. If the exponent gap is 26 or more, the smaller operand is below a
    /// quarter of the larger one's ulp (on either side) and the result is the larger operand.
    /// @param a first operand (binary32 bit pattern).
    /// @param b second operand (binary32 bit pattern).
    /// @return the rounded sum as a binary32 bit pattern.
    function add(uint32 a, uint32 b) internal pure returns (uint32) {
        return uint32(_arith(_OP_ADD, a, b));
    }

    /// @notice fl(a - b) = fl(a + (-b)): one IEEE-754 binary32 subtraction (x - x = +0).
    /// @param a first operand (binary32 bit pattern).
    /// @param b second operand (binary32 bit pattern).
    /// @return the rounded difference as a binary32 bit pattern.
    function sub(uint32 a, uint32 b) internal pure returns (uint32) {
        return uint32(_arith(_OP_ADD, a, b ^ SIGN));
    }

    /// @notice fl(a * b): one IEEE-754 binary32 multiplication, round to nearest, ties to even.
    /// @dev The sign of a zero or infinite product is the XOR of the signs; 0 * inf = NaN.
    /// @param a first operand (binary32 bit pattern).
    /// @param b second operand (binary32 bit pattern).
    /// @return the rounded product as a binary32 bit pattern.
    function mul(uint32 a, uint32 b) internal pure returns (uint32) {
        return uint32(_arith(_OP_MUL, a, b));
    }

    /// @notice fl(a / b): one IEEE-754 binary32 division, round to nearest, ties to even.
    /// @dev x / ±0 = ±inf for x != 0 (division by zero), 0 / 0 = NaN, inf / inf = NaN,
    /// inf / 0 = ±inf, finite / inf = ±0; signs are the XOR of the operands' signs.
    /// @param a dividend (binary32 bit pattern).
    /// @param b divisor (binary32 bit pattern).
    /// @return the rounded quotient as a binary32 bit pattern.
    function div(uint32 a, uint32 b) internal pure returns (uint32) {
        return uint32(_arith(_OP_DIV, a, b));
    }

    // ---------------------------------------------------------------- conversions, predicates

    /// @notice binary32 of the integer n, exact for 0 <= n <= 2^24 (every such integer is
    /// representable). Used for the count n in `Mean` (PROTOCOL.md §1).
    /// @param n a non-negative integer <= 2^24.
    /// @return the binary32 bit pattern of n.
    function fromUint(uint256 n) internal pure returns (uint32) {
        if (n > 1 << 24) revert Binary32__UintTooLarge(n);
        if (n == 0) return 0;
        return uint32(_arith(_OP_FROM_UINT, n, 0)); // exact: at most 25 bits, 2^24 a power of two
    }

    /// @notice Whether the bit pattern is a finite value (not ±inf, not NaN).
    function isFinite(uint32 a) internal pure returns (bool) {
        return a & POS_INF != POS_INF;
    }

    /// @notice Whether the bit pattern is a NaN (exponent all ones, fraction non-zero).
    function isNaN(uint32 a) internal pure returns (bool) {
        return a & 0x7FFFFFFF > POS_INF;
    }

    /// @notice The IEEE-754 totalOrder key of a binary32 (PROTOCOL.md §1): `u ^ 0x7FFFFFFF` if the
    /// sign bit is set, else `u`, read as int32. For non-NaN values the keys order
    /// -inf < ... < -0 < +0 < ... < +inf (so -0 sorts before +0, unlike IEEE `<`).
    /// @param a binary32 bit pattern.
    /// @return the signed key.
    function totalOrderKey(uint32 a) internal pure returns (int32) {
        return int32(a & SIGN != 0 ? a ^ 0x7FFFFFFF : a); // flip the magnitude bits of negatives
    }

    /// @notice a < b in IEEE-754 totalOrder (by `totalOrderKey`); -0 < +0.
    function lt(uint32 a, uint32 b) internal pure returns (bool) {
        return totalOrderKey(a) < totalOrderKey(b);
    }

    // ---------------------------------------------------------------- internal

    uint256 private constant _OP_ADD = 0;
    uint256 private constant _OP_MUL = 1;
    uint256 private constant _OP_DIV = 2;
    uint256 private constant _OP_FROM_UINT = 3;

    /// @dev The arithmetic core, in one assembly block so that its helpers exist once: `op` is
    /// `_OP_ADD` (x + y), `_OP_MUL` (x * y), `_OP_DIV` (x / y) on the binary32 patterns
    /// x = `xBits`, y = `yBits`, or `_OP_FROM_UINT` (the binary32 of the integer `xBits`,
    /// 1 <= xBits <= 2^24; `yBits` unused).
    ///
    /// Finite magnitudes are unpacked into an integer significand s and an effective exponent e
    /// (value = s * 2^(e - 150); e = 1 and no hidden bit for subnormals). The exact result is
    /// written as `m * 2^t` with an integer m (exact for add and mul; for div a 41+ bit quotient
    /// with the sticky bit jammed into its lowest bit) and rounded once by `roundPack`. Every m
    /// is made at least 26 bits long (by 26 guard bits of zeros where needed), so the rounding
    /// shift is always at least 2 and m stays below 2^128.
    ///
    /// Yul words are 256 bits: every value below stays under 2^128, exponents are small signed
    /// numbers (two's complement, compared with `slt`), so nothing wraps around.
    function _arith(uint256 op, uint256 xBits, uint256 yBits) private pure returns (uint256 result) {
        assembly ("memory-safe") {
            // Number of significant bits of v, for 2^25 <= v < 2^128: branch-free binary search
            // for the most significant set bit (Warren, "Hacker's Delight", 2nd ed., §5-3).
            function bitLength(v) -> n {
                n := shl(6, gt(v, 0xFFFFFFFFFFFFFFFF))
                n := or(n, shl(5, gt(shr(n, v), 0xFFFFFFFF)))
                n := or(n, shl(4, gt(shr(n, v), 0xFFFF)))
                n := or(n, shl(3, gt(shr(n, v), 0xFF)))
                n := or(n, shl(2, gt(shr(n, v), 0xF)))
                n := or(n, shl(1, gt(shr(n, v), 0x3)))
                n := add(or(n, gt(shr(n, v), 0x1)), 1)
            }

            // Round m * 2^t (2^25 <= m < 2^128) to nearest, ties to even, and pack with `sign`;
            // g is a guess of bitLength(m) (any value in [2, 127] is correct; the callers pass the
            // length the exact result has when the operands are normal, which saves the search).
            // The result's ulp is 2^q, q = max(bitLength(m) - 24 + t, -149) (-149: the subnormal
            // quantum), so m is shifted right by sh = q - t >= 2 and rounded on the bits shifted
            // out. The pattern is (q + 149) << 23 plus the kept significand: the hidden bit of a
            // normal significand supplies the missing 1 of the exponent field, and a carry out
            // of rounding (to 2^24, or from the largest subnormal to 2^23) moves into the
            // exponent field by itself. Patterns from 0x7F800000 up are overflow: ±inf.
            function roundPack(sign, m, t, g) -> bits {
                // bitLength(m): g or g + 1 are checked first, the full search is the fallback.
                let n := g
                switch shr(g, m)
                case 0 { if iszero(shr(sub(g, 1), m)) { n := bitLength(m) } }
                default {
                    n := add(g, 1)
                    if shr(n, m) { n := bitLength(m) }
                }
                let q := add(sub(n, 24), t)
                if slt(q, not(148)) { q := not(148) } // not(148) = -149
                let sh := sub(q, t)
                // Any shift past bitLength(m) + 1 rounds to 0 like a shift of 130 (m < 2^128),
                // and the cap keeps shl(sh, 1) inside the word.
                if gt(sh, 130) { sh := 130 }
                let sig := shr(sh, m)
                let rem := and(m, sub(shl(sh, 1), 1))
                // Round up if rem > half, or rem == half and sig is odd (ties to even).
                sig := add(sig, gt(add(rem, and(sig, 1)), shl(sub(sh, 1), 1)))
                bits := add(shl(23, add(q, 149)), sig)
                if gt(bits, 0x7F7FFFFF) { bits := 0x7F800000 }
                bits := or(sign, bits)
            }

            // Significand and effective exponent of a finite magnitude pattern.
            function unpack(a) -> s, e {
                e := shr(23, a)
                let subnormal := iszero(e)
                s := or(and(a, 0x7FFFFF), shl(23, iszero(subnormal)))
                e := add(e, subnormal)
            }

            function addF(x, y) -> res {
                let ax := and(x, 0x7FFFFFFF)
                let ay := and(y, 0x7FFFFFFF)
                if or(gt(ax, 0x7F7FFFFF), gt(ay, 0x7F7FFFFF)) {
                    // An inf or NaN operand.
                    res := 0x7FC00000
                    if or(gt(ax, 0x7F800000), gt(ay, 0x7F800000)) { leave } // NaN
                    if eq(ax, ay) {
                        if eq(x, y) { res := x } // inf + inf; inf + (-inf) stays NaN
                        leave
                    }
                    res := x
                    if eq(ay, 0x7F800000) { res := y }
                    leave
                }
                // Order by magnitude (the pattern of a finite magnitude is monotone in it).
                if lt(ax, ay) {
                    let t := x
                    x := y
                    y := t
                    t := ax
                    ax := ay
                    ay := t
                }
                if iszero(ay) {
                    res := x
                    if iszero(ax) { res := and(x, y) } // ±0 + ±0: -0 only if both are -0
                    leave
                }
                let sx, ex := unpack(ax)
                let sy, ey := unpack(ay)
                let d := sub(ex, ey) // >= 0 since ax >= ay
                // y < 2^24 units of 2^(ey-150) and ulp(x) >= 2^(d-1) such units (below a power of
                // two): d >= 26 puts y under a quarter ulp, so x is the rounded sum.
                if gt(d, 25) {
                    res := x
                    leave
                }
                // Exact sum in units of 2^(ey - 176), 26 guard bits: < 2^76.
                // For normal x, mx has d + 50 bits; a sum has d + 50 or d + 51, a difference
                // d + 49 or d + 50 unless d <= 1 (massive cancellation, exact by Sterbenz).
                let mx := shl(add(d, 26), sx)
                let my := shl(26, sy)
                let m := add(mx, my)
                let g := add(d, 50)
                if shr(31, xor(x, y)) {
                    m := sub(mx, my) // opposite signs: mx >= my
                    g := add(d, 49)
                }
                if iszero(m) { leave } // exact cancellation: +0 under round to nearest
                res := roundPack(and(x, 0x80000000), m, sub(ey, 176), g)
            }

            function mulF(x, y) -> res {
                let sign := and(xor(x, y), 0x80000000)
                let ax := and(x, 0x7FFFFFFF)
                let ay := and(y, 0x7FFFFFFF)
                if or(gt(ax, 0x7F7FFFFF), gt(ay, 0x7F7FFFFF)) {
                    res := 0x7FC00000 // NaN operand, or 0 * inf
                    if or(or(gt(ax, 0x7F800000), gt(ay, 0x7F800000)), or(iszero(ax), iszero(ay))) { leave }
                    res := or(sign, 0x7F800000)
                    leave
                }
                if or(iszero(ax), iszero(ay)) {
                    res := sign
                    leave
                }
                let sx, ex := unpack(ax)
                let sy, ey := unpack(ay)
                // Exact product in units of 2^(ex + ey - 326), 26 guard bits: < 2^74 (73 or 74
                // bits for normal operands).
                res := roundPack(sign, shl(26, mul(sx, sy)), sub(add(ex, ey), 326), 73)
            }

            function divF(x, y) -> res {
                let sign := and(xor(x, y), 0x80000000)
                let ax := and(x, 0x7FFFFFFF)
                let ay := and(y, 0x7FFFFFFF)
                if or(or(gt(ax, 0x7F7FFFFF), gt(ay, 0x7F7FFFFF)), or(iszero(ax), iszero(ay))) {
                    res := 0x7FC00000
                    if or(gt(ax, 0x7F800000), gt(ay, 0x7F800000)) { leave } // NaN operand
                    if eq(ax, ay) { leave } // both 0 or both inf: 0/0, inf/inf
                    res := sign // 0 / x, x / inf
                    if or(eq(ax, 0x7F800000), iszero(ay)) { res := or(sign, 0x7F800000) } // inf / x, x / 0
                    leave
                }
                let sx, ex := unpack(ax)
                let sy, ey := unpack(ay)
                // q = floor(sx 2^64 / sy) has 41 to 88 bits (1 <= sx, sy < 2^24; 64 or 65 when
                // both are normal, sx / sy in (1/2, 2)); a non-zero
                // remainder is jammed into its lowest bit, at least 17 bits below the rounding
                // position, where it decides rounding exactly as the infinite quotient would.
                let num := shl(64, sx)
                let q := or(div(num, sy), iszero(iszero(mod(num, sy))))
                res := roundPack(sign, q, sub(sub(ex, ey), 64), 64)
            }

            // Operands arrive as uint32 (upper bits may be dirty in assembly): mask them.
            switch op
            case 0 { result := addF(and(xBits, 0xFFFFFFFF), and(yBits, 0xFFFFFFFF)) }
            case 1 { result := mulF(and(xBits, 0xFFFFFFFF), and(yBits, 0xFFFFFFFF)) }
            case 2 { result := divF(and(xBits, 0xFFFFFFFF), and(yBits, 0xFFFFFFFF)) }
            default { result := roundPack(0, shl(26, xBits), not(25), 27) } // xBits * 2^26 * 2^-26, exact
        }
    }
}
