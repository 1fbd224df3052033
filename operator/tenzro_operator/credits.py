"""A trainer's credits in a root-flow run, as ``commitRound`` and ``claim`` compute them
(contracts/PROTOCOL.md §5 "Endorsed credit").

Each round trainer i earns ``fragment_sizes[f]`` credits (coordinates) for every bit f of its
accepted bitmap. The registry keeps them in one word per trainer, the leaf of the credits root:
the credits of submissions the syncer endorsed in the low 128 bits, of those it accepted without
its endorsement (forced payloads it found no work in) in the high 128 bits. ``totalCredits`` sums
both halves; ``claim`` pays ``floor(pool x paid / totalCredits)``, paid = `paid_credits` of the word.
No chain, IPFS or torch import: the views use it.
"""

from __future__ import annotations

from typing import Sequence

__all__ = ["HALF", "bitmap_credits", "credit_halves", "credit_word", "paid_credits", "word"]

HALF = 128  # bits of each half of a credits word


def bitmap_credits(bitmap: int, sizes: Sequence[int]) -> int:
    """The credits one round's accepted bitmap earns: ``sizes[f]`` for every bit f (``commitRound``'s sum)."""
    return sum(n for f, n in enumerate(sizes) if int(bitmap) >> f & 1)


def word(endorsed: int, unendorsed: int) -> int:
    """The credits word of ``endorsed`` and ``unendorsed`` credits (the inverse of `credit_halves`)."""
    return int(endorsed) + (int(unendorsed) << HALF)


def credit_word(accepted: int, unendorsed: int, sizes: Sequence[int]) -> int:
    """One round's credits word of a trainer, as ``commitRound`` adds it: `bitmap_credits` of its
    accepted bits outside its ``unendorsed`` bitmap in the low 128 bits, of those inside it in the
    high 128 (the registry refuses unendorsed bits outside the accepted ones)."""
    u = int(unendorsed) & int(accepted)
    return word(bitmap_credits(int(accepted) & ~u, sizes), bitmap_credits(u, sizes))


def credit_halves(word: int) -> tuple[int, int]:
    """(endorsed, unendorsed) credits of a credits word (coordinates)."""
    return int(word) & ((1 << HALF) - 1), int(word) >> HALF


def paid_credits(word: int) -> int:
    """The credits ``claim`` pays a credits word on: the endorsed e plus the unendorsed u up to e,
    ``e + min(u, e)``. What it leaves unpaid stays in the pool, the sponsor's at the sweep."""
    e, u = credit_halves(word)
    return e + min(u, e)
