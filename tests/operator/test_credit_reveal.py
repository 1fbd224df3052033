"""The seed of the contribution test's batches (issue #26): fixed by the round's commitments, which no
trainer knows before the commit phase closes, and recomputed by anyone from them in any order."""

from tenzro_operator.shard_score import round_reveal


def test_the_reveal_depends_on_every_commitment_and_the_round_not_their_order():
    task, cs = b"\x11" * 32, [b"\x01" * 32, b"\x02" * 32, b"\x03" * 32]
    r = round_reveal(task, 4, cs)
    assert r == round_reveal(task, 4, list(reversed(cs)))
    assert r != round_reveal(task, 5, cs)
    assert r != round_reveal(task, 4, cs[:2])  # one more trainer's commitment changes it
    assert r != round_reveal(b"\x12" * 32, 4, cs)
    assert len(r) == 64 and int(r, 16) >= 0
