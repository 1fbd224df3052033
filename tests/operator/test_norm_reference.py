"""The root flow's norm screen against a reference (``evidence.exceeds_reference``, the rule of
``proveNormOutlier``): ``s > fl(screenSq * m)`` in IEEE totalOrder with ``m`` the binary32
CoordinateMedian of the previous round's accepted sums; the target's own sum is not in the
reference, so forcing sybils cannot move it."""

from __future__ import annotations

import math

import numpy as np

from tenzro_operator.evidence import exceeds_reference, norm_outliers


def bits(x: float) -> int:
    return int(np.array([x], dtype=np.float32).view(np.uint32)[0])


SCREEN = bits(100.0)  # a norm screen of x10


def test_the_bound_is_the_screen_times_the_references_median():
    ref = [bits(1.0), bits(1.0), bits(4.0)]  # median 1.0: bound 100.0
    assert not exceeds_reference(bits(100.0), ref, SCREEN)  # equal is not over
    assert exceeds_reference(bits(float(np.nextafter(np.float32(100.0), np.float32(200.0)))), ref, SCREEN)
    assert exceeds_reference(bits(math.nan), ref, SCREEN)  # a NaN sum always is
    assert not exceeds_reference(bits(1e9), [], SCREEN) and not exceeds_reference(bits(1e9), ref, 0)


def test_sybils_cannot_move_the_reference_but_can_move_the_rounds_own_median():
    honest = [bits(1.0)] * 3
    boosted = bits(500.0)
    sybils = {i: bits(1000.0) for i in range(3, 6)}  # three sybils force large sums beside the booster
    # against the round's own median (v1's rule) the booster hides among the sybils
    assert 6 not in norm_outliers({**dict(enumerate(honest)), **sybils, 6: boosted}, SCREEN)
    # against the previous round's accepted sums it does not
    assert exceeds_reference(boosted, honest, SCREEN)
