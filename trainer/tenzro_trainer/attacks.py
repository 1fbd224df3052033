"""Byzantine trainers for the simulator: what a dishonest trainer sends instead of its pseudo-gradient.

Each attack forges one fragment's payload ``{name: fp32 tensor}`` (or sends nothing) from what such
a trainer can know when it submits. The strong ones are *omniscient*, as in the papers that define
them: they see every honest pseudo-gradient of the round before they submit (a colluding set that
also runs honest nodes, or a trainer that waits for the others' reveals; the root flow's
commit-reveal takes this away in the protocol, the simulator grants it to test the rules).

==============  ===============================================================================
name            payload of fragment f in round r
==============  ===============================================================================
``sign_flip``   ``-d``, the attacker's own honest pseudo-gradient negated (same norm, so no norm
                screen sees it; e.g. Allen-Zhu et al. 2021, "Byzantine-resilient non-convex SGD").
``scale100``    ``100 d`` (a boosted update; Bhagoji et al. 2019 "model replacement" scale).
``gaussian10``  i.i.d. ``N(0, s^2)`` per coordinate with ``s = 10 x`` the RMS value of the honest
                pseudo-gradients (so its L2 norm is about 10x an honest one).
``alie``        "A Little Is Enough" (Baruch, Baruch & Goldberg 2019, NeurIPS, Sec. 3):
                ``mu - z sigma`` per coordinate over the honest payloads, ``z`` the paper's
                ``z_max = Phi^-1((n - s) / n)`` with ``s = floor(n / 2 + 1) - f`` (n trainers, f of
                them Byzantine; 0.32 at 2 of 8, 0.67 at 3 of 8). Within one sigma of the honest
                mean in every coordinate, so every distance- and order-based screen lets it in.
``ipm0.1``,     inner-product manipulation (Xie, Koyejo & Gupta 2020, "Fall of Empires", UAI,
``ipm100``      Sec. 3): ``-eps x mean(honest)`` with eps 0.1 (small: passes norm screens and
                median-style rules) or 100 (large).
``nan``         every value NaN (a malformed payload; validation rejects it).
``stale``       the attacker trains once, in its first round, and replays that pseudo-gradient
                every later round (a lazy trainer re-signing an old payload for a new round).
``free_rider``  never trains: sends the previous round's public aggregate of the fragment (what
                anyone derives from the committed weights), zeros in the first round (Lin et al.
                2019, "Free-riders in federated learning: attacks and defenses", Sec. 3).
``absent``      sends nothing (the reference of the attack benchmark: the trainer is not there).
==============  ===============================================================================

Usage::

    atk = build_attack("alie")
    if atk.needs_training(r): ...               # train the attacker's own model this round
    payload = atk.forge(AttackView(round=r, fragment=f, n=8, f=2, honest=deltas, own=own, previous=agg))
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Callable, Mapping

import torch
from torch import Tensor

Payload = dict[str, Tensor]


@dataclass
class AttackView:
    """What a Byzantine trainer sees when it forges fragment ``fragment`` of round ``round``.

    Attributes:
        round: the round, from 1.
        fragment: the fragment index.
        n: trainers in the run (honest and Byzantine), f: Byzantine ones among them.
        honest: the round's honest pseudo-gradients of the fragment, ``{name: fp32 tensor}`` each,
            in ascending trainer order (the omniscient view; may be empty).
        own: the attacker's own honest pseudo-gradient of the fragment when it trained this round
            (`Attack.needs_training`), else None.
        previous: the aggregate the syncer applied to the fragment in the previous round (public),
            None in round 1.
        generator: a seeded generator for random attacks (reproducible runs).
    """

    round: int
    fragment: int
    n: int
    f: int
    honest: list[Mapping[str, Tensor]]
    own: Mapping[str, Tensor] | None = None
    previous: Mapping[str, Tensor] | None = None
    generator: torch.Generator | None = None


def _stack(payloads: list[Mapping[str, Tensor]], name: str) -> Tensor:
    return torch.stack([p[name].to(torch.float32) for p in payloads])


def _honest_mean(view: AttackView) -> Payload:
    return {n: _stack(view.honest, n).mean(dim=0) for n in view.honest[0]}


def alie_z(n: int, f: int) -> float:
    """Baruch et al. 2019's ``z_max`` for n trainers of which f are Byzantine (Sec. 3, Eq. 2):
    ``Phi^-1((n - s) / n)``, ``s = floor(n / 2 + 1) - f``. Raises ValueError unless 0 < f < n."""
    if not 0 < f < n:
        raise ValueError(f"ALIE needs 0 < f < n, got n={n}, f={f}")
    s = math.floor(n / 2 + 1) - f
    return statistics.NormalDist().inv_cdf((n - s) / n)


@dataclass
class Attack:
    """One Byzantine trainer's behaviour. ``forge`` returns the payload it submits (None: none)."""

    _forge: Callable[["Attack", AttackView], Payload | None]
    trains: Callable[[int], bool] = lambda r: False
    memory: dict = field(default_factory=dict)  # per-attacker state (stale: its first payloads)

    def needs_training(self, round_: int) -> bool:
        """Whether the attacker runs its inner steps in this round (its own pseudo-gradient is used)."""
        return self.trains(round_)

    def forge(self, view: AttackView) -> Payload | None:
        return self._forge(self, view)


def _sign_flip(_: Attack, v: AttackView) -> Payload:
    return {n: -t for n, t in v.own.items()}


def _scale100(_: Attack, v: AttackView) -> Payload:
    return {n: 100.0 * t for n, t in v.own.items()}


def _gaussian10(_: Attack, v: AttackView) -> Payload:
    ref = v.honest[0]
    sq = sum(float(torch.sum(p[n].double() ** 2)) for p in v.honest for n in p)
    rms = math.sqrt(sq / (len(v.honest) * sum(t.numel() for t in ref.values())))
    return {n: 10.0 * rms * torch.randn(t.shape, generator=v.generator, dtype=torch.float32) for n, t in ref.items()}


def _alie(_: Attack, v: AttackView) -> Payload:
    z = alie_z(v.n, v.f)
    out = {}
    for n in v.honest[0]:
        x = _stack(v.honest, n)
        std = x.std(dim=0, unbiased=True) if x.shape[0] > 1 else torch.zeros_like(x[0])
        out[n] = x.mean(dim=0) - z * std
    return out


def _ipm(eps: float) -> Callable[[Attack, AttackView], Payload]:
    def forge(_: Attack, v: AttackView) -> Payload:
        return {n: -eps * t for n, t in _honest_mean(v).items()}
    return forge


def _nan(_: Attack, v: AttackView) -> Payload:
    return {n: torch.full_like(t, float("nan")) for n, t in v.honest[0].items()}


def _stale(a: Attack, v: AttackView) -> Payload:
    if v.fragment not in a.memory:
        a.memory[v.fragment] = {n: t.clone() for n, t in v.own.items()}
    return {n: t.clone() for n, t in a.memory[v.fragment].items()}


def _free_rider(_: Attack, v: AttackView) -> Payload:
    if v.previous is None:
        return {n: torch.zeros_like(t) for n, t in v.honest[0].items()}
    return {n: t.clone() for n, t in v.previous.items()}


def _absent(_: Attack, v: AttackView) -> None:
    return None


_BUILDERS: dict[str, Callable[[], Attack]] = {
    "sign_flip": lambda: Attack(_sign_flip, trains=lambda r: True),
    "scale100": lambda: Attack(_scale100, trains=lambda r: True),
    "gaussian10": lambda: Attack(_gaussian10),
    "alie": lambda: Attack(_alie),
    "ipm0.1": lambda: Attack(_ipm(0.1)),
    "ipm100": lambda: Attack(_ipm(100.0)),
    "nan": lambda: Attack(_nan),
    "stale": lambda: Attack(_stale, trains=lambda r: r == 1),
    "free_rider": lambda: Attack(_free_rider),
    "absent": lambda: Attack(_absent),
}
ATTACK_NAMES = tuple(_BUILDERS)


def build_attack(name: str) -> Attack:
    """A fresh attacker (own state) of kind ``name`` (`ATTACK_NAMES`). Raises ValueError otherwise."""
    if name not in _BUILDERS:
        raise ValueError(f"unknown attack {name!r}; known: {', '.join(ATTACK_NAMES)}")
    return _BUILDERS[name]()


__all__ = ["ATTACK_NAMES", "Attack", "AttackView", "alie_z", "build_attack"]
