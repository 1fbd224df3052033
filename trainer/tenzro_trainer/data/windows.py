"""From long-format frames to training and evaluation windows.

Scaling (two stages, documented here once):

1. Per series: every series is scaled by the mean and standard deviation of its *training*
   part (the held-out tail never enters the statistics): ``y' = (y - mean_train) / std_train``.
   This makes the per-window std floor of stage 2 comparable across series.
2. Per window: the model normalizes each window by its own context's mean and std (RevIN /
   TimesFM style, :mod:`tenzro_trainer.models.common`); the loss is MSE on those normalized targets.

Held-out split by time: the last ``heldout_len`` points of every series (at least two
horizons, about ``heldout_frac`` of the series) are held out. Training windows lie entirely
before the cut; evaluation windows have their forecast origin inside the tail (rolling origins;
their context may reach back before the cut, as in any rolling-origin evaluation).

Padded windows (``min_context`` below ``context_len``, for masked models): a window's context may
be shorter than ``context_len``, down to ``min_context`` observed points, and is left-padded with
NaN; its target may run past the end of the training part, the missing steps are NaN (the loss
skips them). Short series then train instead of being dropped; a series too short for a held-out
tail is kept for training only (``cut == len``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from tenzro_trainer.data.loader import validate_long_format
from tenzro_trainer.errors import DataError


def shard_series(unique_ids, num_shards: int) -> list[list[str]]:
    """Deterministic partition of series into ``num_shards`` shards.

    Algorithm: order the distinct ids by ``sha256(uid_utf8)`` (ties impossible for distinct ids),
    then deal them round-robin; every shard lists its ids in ascending string order. The result
    depends only on the set of ids and ``num_shards`` (not on their order), so every host
    computes the same shards; shard sizes differ by at most one.

    Raises:
        DataError: ``num_shards`` < 1 or more shards than series.
    """
    ids = sorted(set(map(str, unique_ids)))
    if num_shards < 1:
        raise DataError(f"num_shards must be >= 1, got {num_shards}")
    if num_shards > len(ids):
        raise DataError(f"cannot split {len(ids)} series into {num_shards} non-empty shards")
    ordered = sorted(ids, key=lambda u: hashlib.sha256(u.encode("utf-8")).digest())
    shards = [sorted(ordered[i::num_shards]) for i in range(num_shards)]
    return shards


@dataclass
class Split:
    """Series as float64 arrays with their held-out cut.

    Attributes:
        values: uid -> full series (per-series scaled, see the module docstring).
        cut: uid -> index of the first held-out point.
        mean, std: uid -> per-series scaling statistics (training part).
        context_len, horizon: the window geometry the split was made for.
    """

    values: dict[str, np.ndarray]
    cut: dict[str, int]
    mean: dict[str, float]
    std: dict[str, float]
    context_len: int
    horizon: int
    dropped: list[str] = field(default_factory=list)
    min_context: int | None = None  # padded windows (see the module docstring) when below context_len

    @property
    def padded(self) -> bool:
        return self.min_context is not None and self.min_context < self.context_len

    @property
    def unique_ids(self) -> list[str]:
        return sorted(self.values)

    def train(self, uid: str) -> np.ndarray:
        """Training part of a series (scaled)."""
        return self.values[uid][: self.cut[uid]]

    def unscale(self, uid: str, x: np.ndarray) -> np.ndarray:
        """Back to the original units."""
        return x * self.std[uid] + self.mean[uid]


def series_arrays(df: pd.DataFrame) -> dict[str, np.ndarray]:
    """uid -> float64 values in time order, NaNs filled by linear interpolation (then edge fill)."""
    df = validate_long_format(df)
    out = {}
    for uid, g in df.groupby("unique_id", sort=True):
        y = g["y"].to_numpy(dtype="float64")
        if np.isnan(y).any():
            y = pd.Series(y).interpolate(limit_direction="both").to_numpy()
        if np.isnan(y).all():
            raise DataError(f"series {uid!r} has no numeric values")
        out[uid] = y
    return out


def train_heldout_split(
    df: pd.DataFrame,
    context_len: int,
    horizon: int,
    heldout_frac: float = 0.1,
    min_heldout: int | None = None,
    min_context: int | None = None,
) -> Split:
    """Split every series by time: the last ``max(min_heldout, heldout_frac * len)`` points are held out.

    ``min_heldout`` defaults to ``2 * horizon``. The held-out tail shrinks (down to ``horizon``)
    when a longer one would leave fewer than ``context_len + horizon`` training points; series
    shorter than ``context_len + 2 * horizon`` are dropped (listed in ``Split.dropped``).

    With ``min_context < context_len`` (padded windows, masked models) the tail is
    ``max(horizon, heldout_frac * len)`` points when at least half the series (and ``min_context + 1``
    points) stays for training, else empty (a training-only series); series shorter than
    ``min_context + 1`` are dropped. ``min_heldout`` does not apply.

    Raises:
        DataError: no series is long enough.
    """
    min_heldout = 2 * horizon if min_heldout is None else min_heldout
    padded = min_context is not None and min_context < context_len
    values, cut, mean, std, dropped = {}, {}, {}, {}, []
    for uid, y in series_arrays(df).items():
        n = len(y)
        want = max(min_heldout, int(round(heldout_frac * n)))
        if padded:
            tail = max(horizon, int(round(heldout_frac * n)))
            tail = tail if n - tail >= max(min_context + 1, n // 2) else 0
            if n < min_context + 1:
                dropped.append(uid)
                continue
        else:
            tail = min(want, n - (context_len + horizon))
        if not padded and tail < horizon:
            dropped.append(uid)
            continue
        c = n - tail
        m, s = float(y[:c].mean()), float(y[:c].std())
        s = s if s > 1e-12 else 1.0
        values[uid], cut[uid], mean[uid], std[uid] = (y - m) / s, c, m, s
    if not values:
        raise DataError(
            f"no series is long enough for context_len={context_len}, horizon={horizon} "
            f"(need at least {context_len + 2 * horizon} points)"
        )
    return Split(values, cut, mean, std, context_len, horizon, dropped, min_context if padded else None)


class WindowDataset:
    """Training windows (context + horizon) of some series of a split, sampled reproducibly.

    Sampling: a series uniformly among the dataset's series, then a start uniformly among that
    series' training windows (so long hourly series do not drown short monthly ones). Batches
    come from a ``torch.Generator`` seeded with ``seed``: the same seed gives the same batches.
    """

    def __init__(self, split: Split, unique_ids=None, seed: int = 0):
        ids = sorted(unique_ids) if unique_ids is not None else split.unique_ids
        ids = [u for u in ids if u in split.values]
        if not ids:
            raise DataError("WindowDataset: none of the given series is in the split")
        self.window = split.context_len + split.horizon
        parts, offsets, counts = [], [], []
        pos = 0
        if split.padded:  # [L NaN] + train + [h NaN] per series; window k of series u starts at off_u + k
            L, h = split.context_len, split.horizon
            for u in ids:
                tr = split.train(u).astype("float32")
                parts.append(np.concatenate([np.full(L, np.nan, "float32"), tr, np.full(h, np.nan, "float32")]))
                offsets.append(pos + split.min_context)
                counts.append(len(tr) - split.min_context)
                pos += len(parts[-1])
            ids_ok = [c > 0 for c in counts]
            if not all(ids_ok):
                raise DataError("WindowDataset: a series of the split is shorter than min_context + 1")
        for u in ids if not split.padded else ():
            tr = split.train(u).astype("float32")
            parts.append(tr)
            offsets.append(pos)
            counts.append(len(tr) - self.window + 1)
            pos += len(tr)
        self.unique_ids = ids
        self.buffer = torch.from_numpy(np.concatenate(parts))
        self.offsets = torch.tensor(offsets, dtype=torch.int64)
        self.counts = torch.tensor(counts, dtype=torch.float64)
        self._arange = torch.arange(self.window)
        self.generator = torch.Generator().manual_seed(seed)

    def sample(self, batch_size: int) -> Tensor:
        """A batch of windows, (batch_size, context_len + horizon) float32."""
        g = self.generator
        s = torch.randint(len(self.unique_ids), (batch_size,), generator=g)
        r = torch.rand(batch_size, generator=g, dtype=torch.float64)
        start = self.offsets[s] + (r * self.counts[s]).long()
        return self.buffer[start[:, None] + self._arange]

    def fixed_windows(self, per_series: int = 8) -> Tensor:
        """Evenly spaced training windows, ``per_series`` per series (for a steady training-loss
        reading, EVALUATION.md). Returns (n, context_len + horizon) float32."""
        starts = []
        for off, cnt in zip(self.offsets.tolist(), self.counts.long().tolist()):
            k = min(per_series, cnt)
            starts += [off + int(x) for x in np.linspace(0, cnt - 1, k).round()]
        return self.buffer[torch.tensor(starts)[:, None] + self._arange]

    def state_dict(self) -> dict:
        """Sampler state (the generator), so a restarted worker draws the same next batches."""
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["generator"])


@dataclass
class EvalWindows:
    """Held-out rolling-origin windows.

    Attributes:
        context: (n, context_len) float32, per-series scaled.
        target: (n, horizon) float32, per-series scaled.
        series: length-n list of unique_ids.
        origin: length-n array of origin indices into the series.
    """

    context: Tensor
    target: Tensor
    series: list[str]
    origin: np.ndarray


def heldout_windows(split: Split, max_per_series: int = 12, unique_ids=None) -> EvalWindows:
    """Up to ``max_per_series`` evenly spaced rolling origins in every series' held-out tail
    (padded splits: contexts shorter than ``context_len`` are left-padded with NaN; training-only
    series are skipped)."""
    L, h = split.context_len, split.horizon
    ctx, tgt, ser, org = [], [], [], []
    for u in sorted(unique_ids) if unique_ids is not None else split.unique_ids:
        y = split.values[u].astype("float32")
        first, last = split.cut[u], len(y) - h
        if last < first:
            continue
        k = min(max_per_series, last - first + 1)
        for o in np.unique(np.linspace(first, last, k).round().astype(int)):
            c = y[max(0, o - L) : o]
            ctx.append(c if len(c) == L else np.concatenate([np.full(L - len(c), np.nan, "float32"), c]))
            tgt.append(y[o : o + h])
            ser.append(u)
            org.append(o)
    return EvalWindows(torch.from_numpy(np.stack(ctx)), torch.from_numpy(np.stack(tgt)), ser, np.array(org))
