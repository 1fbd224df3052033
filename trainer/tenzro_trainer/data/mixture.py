"""The training mixture of the zero-shot recipes: real series, TSMixup mixtures and KernelSynth
series (Ansari et al. 2024, Sec. 4), materialized as one long-format frame.

Mixing weights are realized by series counts: :class:`~tenzro_trainer.data.windows.WindowDataset`
draws a series uniformly, then a window of it, so a group's share of the batches equals its share
of the series. With the defaults (weights real 0.05, TSMixup 0.55, KernelSynth 0.40; Chronos trained
on 90% TSMixup / 10% KernelSynth, its TSMixup including single-series draws, i.e. real windows)
and the 96 real series of the extended collection: 96 real, 1056 TSMixup, 768 KernelSynth series
(953k points). Real series still reach about a fifth of the batches: a third of the TSMixup
series are single-series draws. The earlier 0.2 / 0.6 / 0.2 (480 series, 171k points) overfit:
zero-shot relative MASE 0.988 after 30 rounds and 1.028 after 60, against 0.882 for the same
recipe on these shares (trainer/benchmarks/results/zero_shot*.md).

The frame is what trainers train on, so its dataset hash (:func:`tenzro_trainer.data.dataset_hash`)
covers real and synthetic series alike; the task spec records the mixture's parameters and the hash.

Usage::

    df = training_mixture(MixtureConfig())             # ~1.5 minutes (KernelSynth's GP samples)
    shares = mixture_shares(df)                        # {"real": 0.05, "tsmixup": 0.55, "kernelsynth": 0.4}
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache

import pandas as pd

from tenzro_trainer.data.collection import default_collection, extended_collection
from tenzro_trainer.data.heldout import check_disjoint
from tenzro_trainer.data.synthetic import kernel_synth, ts_mixup
from tenzro_trainer.errors import DataError


@dataclass(frozen=True)
class MixtureConfig:
    """Parameters of :func:`training_mixture` (recorded in the task spec's metadata).

    Attributes:
        real: ``"extended"`` (:func:`~tenzro_trainer.data.collection.extended_collection`) or
            ``"default"`` (the demo's collection).
        weight_real, weight_tsmixup, weight_kernelsynth: shares of the training batches.
        kernelsynth_length: points per KernelSynth series.
        tsmixup_max_len: longest TSMixup window.
        seed: seeds both generators.
    """

    real: str = "extended"
    weight_real: float = 0.05
    weight_tsmixup: float = 0.55
    weight_kernelsynth: float = 0.40
    kernelsynth_length: int = 1024
    tsmixup_max_len: int = 1024
    seed: int = 0

    def counts(self, n_real: int) -> tuple[int, int]:
        """(TSMixup series, KernelSynth series) that realize the weights next to ``n_real`` real series."""
        if self.weight_real <= 0 or min(self.weight_tsmixup, self.weight_kernelsynth) < 0:
            raise DataError("mixture weights: real must be > 0, the others >= 0")
        return (round(n_real * self.weight_tsmixup / self.weight_real),
                round(n_real * self.weight_kernelsynth / self.weight_real))

    def to_dict(self) -> dict:
        return asdict(self)


def training_mixture(cfg: MixtureConfig = MixtureConfig()) -> pd.DataFrame:
    """Real + TSMixup + KernelSynth series in long format (ids ``tsmixup/…``, ``kernelsynth/…`` for
    the synthetic ones). Refuses real data that overlaps the zero-shot collection. The last frame
    built is kept in memory (a copy is returned), so asking twice in one process costs one build.

    Raises:
        DataError: unknown ``cfg.real``, bad weights, or a zero-shot series in the real data.
    """
    return _build(cfg).copy()


@lru_cache(maxsize=1)
def _build(cfg: MixtureConfig) -> pd.DataFrame:
    if cfg.real not in ("extended", "default"):
        raise DataError(f"MixtureConfig.real must be 'extended' or 'default', got {cfg.real!r}")
    real = extended_collection() if cfg.real == "extended" else default_collection()
    check_disjoint(real["unique_id"].unique())
    n_mix, n_ks = cfg.counts(real["unique_id"].nunique())
    parts = [real]
    if n_mix:
        parts.append(ts_mixup(real, n_mix, max_len=cfg.tsmixup_max_len, seed=cfg.seed))
    if n_ks:
        parts.append(kernel_synth(n_ks, length=cfg.kernelsynth_length, seed=cfg.seed + 1))
    return pd.concat(parts, ignore_index=True)


def mixture_shares(df: pd.DataFrame) -> dict[str, float]:
    """Share of the series (hence of the sampled windows) per group: real, tsmixup, kernelsynth."""
    ids = pd.Series(df["unique_id"].unique())
    group = ids.str.extract(r"^(tsmixup|kernelsynth)/", expand=False).fillna("real")
    return {g: float((group == g).mean()) for g in ("real", "tsmixup", "kernelsynth")}


__all__ = ["MixtureConfig", "mixture_shares", "training_mixture"]
