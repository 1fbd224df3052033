"""The training mixture of the zero-shot recipes: real series, TSMixup mixtures, KernelSynth
series (Ansari et al. 2024, Sec. 4) and TrendSeason series (a statistical prior of short
trending and seasonal series, :func:`tenzro_trainer.data.synthetic.trend_season`), materialized
as one long-format frame.

Mixing weights are realized by series counts: :class:`~tenzro_trainer.data.windows.WindowDataset`
draws a series uniformly, then a window of it, so a group's share of the batches equals its share
of the series. With the defaults (weights real 0.02, TSMixup 0.22, KernelSynth 0.16, TrendSeason
0.60) and the 96 real series of the extended collection: 96 real, 1056 TSMixup, 768 KernelSynth
and 2880 TrendSeason series. Without TrendSeason (real 0.05, TSMixup 0.55, KernelSynth 0.40, the
same counts of the other groups; Chronos trained on 90% TSMixup / 10% KernelSynth) the recipe
lost to every statistical baseline on short yearly, quarterly and monthly series, pulling their
forecasts back to the mean instead of carrying level and trend on (issue #28). The earlier
0.2 / 0.6 / 0.2 without TrendSeason (480 series, 171k points) overfit: zero-shot relative MASE
0.988 after 30 rounds and 1.028 after 60 (trainer/benchmarks/results/zero_shot*.md).

The frame is what trainers train on, so its dataset hash (:func:`tenzro_trainer.data.dataset_hash`)
covers real and synthetic series alike; the task spec records the mixture's parameters and the hash.

Usage::

    df = training_mixture(MixtureConfig())             # ~1.5 minutes (KernelSynth's GP samples)
    shares = mixture_shares(df)        # {"real": 0.02, "tsmixup": 0.22, "kernelsynth": 0.16, "trendseason": 0.6}
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache

import pandas as pd

from tenzro_trainer.data.collection import default_collection, extended_collection
from tenzro_trainer.data.heldout import check_disjoint
from tenzro_trainer.data.synthetic import kernel_synth, trend_season, ts_mixup
from tenzro_trainer.errors import DataError


@dataclass(frozen=True)
class MixtureConfig:
    """Parameters of :func:`training_mixture` (recorded in the task spec's metadata).

    Attributes:
        real: ``"extended"`` (:func:`~tenzro_trainer.data.collection.extended_collection`) or
            ``"default"`` (the demo's collection).
        weight_real, weight_tsmixup, weight_kernelsynth, weight_trendseason: shares of the
            training batches.
        kernelsynth_length: points per KernelSynth series.
        trendseason_min_len, trendseason_max_len: range of the TrendSeason lengths (log-uniform).
        trendseason_version: TrendSeason's prior (:func:`~tenzro_trainer.data.synthetic.trend_season`):
            1 (the recipe's, dataset hash ``2bea2dc0…``) or 2 (trend and level walk scaled by the
            frequency, free seasonal profiles: no better, results/zero_shot_levers.md).
        tsmixup_max_len: longest TSMixup window.
        seed: seeds both generators.
    """

    real: str = "extended"
    weight_real: float = 0.02
    weight_tsmixup: float = 0.22
    weight_kernelsynth: float = 0.16
    weight_trendseason: float = 0.60
    kernelsynth_length: int = 1024
    trendseason_min_len: int = 24
    trendseason_max_len: int = 512
    trendseason_version: int = 1
    tsmixup_max_len: int = 1024
    seed: int = 0

    def counts(self, n_real: int) -> tuple[int, int, int]:
        """(TSMixup, KernelSynth, TrendSeason series) that realize the weights next to ``n_real``
        real series."""
        if self.weight_real <= 0 or min(self.weight_tsmixup, self.weight_kernelsynth, self.weight_trendseason) < 0:
            raise DataError("mixture weights: real must be > 0, the others >= 0")
        return tuple(round(n_real * w / self.weight_real)
                     for w in (self.weight_tsmixup, self.weight_kernelsynth, self.weight_trendseason))

    @classmethod
    def with_shares(cls, shares: Sequence[float] | None = None, **fields) -> MixtureConfig:
        """The config with ``shares`` (real, TSMixup, KernelSynth, TrendSeason: four numbers in that
        order) for the default shares when given, and ``fields`` for other defaults.

        Raises:
            DataError: ``shares`` is not four numbers.
        """
        if shares:
            if len(shares) != 4:
                raise DataError(f"mixture shares: four numbers (real, TSMixup, KernelSynth, TrendSeason), "
                                f"got {list(shares)}")
            fields.update(zip(("weight_real", "weight_tsmixup", "weight_kernelsynth", "weight_trendseason"),
                              map(float, shares)))
        return cls(**fields)

    def to_dict(self) -> dict:
        return asdict(self)


def training_mixture(cfg: MixtureConfig = MixtureConfig()) -> pd.DataFrame:
    """Real + TSMixup + KernelSynth + TrendSeason series in long format (ids ``tsmixup/…``,
    ``kernelsynth/…``, ``trendseason/…`` for the synthetic ones). Refuses real data that overlaps the zero-shot collection. The last frame
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
    n_mix, n_ks, n_ts = cfg.counts(real["unique_id"].nunique())
    parts = [real]
    if n_mix:
        parts.append(ts_mixup(real, n_mix, max_len=cfg.tsmixup_max_len, seed=cfg.seed))
    if n_ks:
        parts.append(kernel_synth(n_ks, length=cfg.kernelsynth_length, seed=cfg.seed + 1))
    if n_ts:
        parts.append(trend_season(n_ts, cfg.trendseason_min_len, cfg.trendseason_max_len, seed=cfg.seed + 2,
                                  version=cfg.trendseason_version))
    return pd.concat(parts, ignore_index=True)


def mixture_shares(df: pd.DataFrame) -> dict[str, float]:
    """Share of the series (hence of the sampled windows) per group: real, tsmixup, kernelsynth,
    trendseason."""
    ids = pd.Series(df["unique_id"].unique())
    group = ids.str.extract(r"^(tsmixup|kernelsynth|trendseason)/", expand=False).fillna("real")
    return {g: float((group == g).mean()) for g in ("real", "tsmixup", "kernelsynth", "trendseason")}


__all__ = ["MixtureConfig", "mixture_shares", "training_mixture"]
