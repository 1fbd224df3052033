"""Synthetic training series: KernelSynth and TSMixup (Ansari et al. 2024, "Chronos: Learning the
Language of Time Series", arXiv:2403.07815, Sec. 4.1 and 4.2, Algorithms 1 and 2).

**KernelSynth** (Alg. 2): draw ``j ~ U{1, ..., max_kernels}`` kernels with replacement from a bank
of Gaussian-process kernels (linear, RBF, periodic, rational quadratic, white noise, constant),
combine them one by one with a random ``+`` or ``x``, and sample one series of ``length`` points
from the GP prior with the composite kernel on ``x = linspace(0, 1, length)``. The bank follows
the paper's: periodic kernels with the periods of common seasonalities (24, 48, 96, 168, 336,
672, 7, 14, 30, 60, 365, 730, 4, 26, 52, 6, 12, 40, 10 steps), RBF and rational quadratic length
scales 0.1, 1, 10, linear kernels with offsets 0, 1, 10, white noise 0.1 and 1.

**TrendSeason**: short series drawn from the statistical models the baselines fit, the
trend x seasonality x noise prior of ForecastPFN (Dooley et al. 2023, "ForecastPFN:
Synthetically-Trained Zero-Shot Forecasting", NeurIPS, Sec. 3) in log space: a drift (damped
with probability 1/2, Gardner & McKenzie 1985), a random-walk level, 1-3 harmonics of the season
of a drawn frequency (yearly 1, quarterly 4, monthly 12, weekly 52, daily 7, hourly 24) and AR(1)
noise; 60 % of the series are the exponential of that (positive, multiplicative), the rest an
affine map of it (additive). Lengths are log-uniform in [24, 512]. KernelSynth's and TSMixup's
series are 128-1024 points of mostly stationary or periodic shape; this one teaches what short
yearly, quarterly and monthly series do (persist and trend), where the recipe lost most.

**TSMixup** (Alg. 1): draw ``k ~ U{1, ..., max_mix}`` source series uniformly, a window length
``l ~ U[min_len, max_len]``, a random length-``l`` window of each source (as much as it has when
shorter), scale each window by its mean absolute value, and mix them with weights
``lambda ~ Dirichlet(alpha)`` (alpha 1.5 as in the paper), aligned at their ends.

Both are deterministic given the seed and the inputs (NumPy ``RandomState``; Cholesky of the GP
covariance in float64); series are materialized as long-format frames and become part of the
training dataset, so its hash (:mod:`tenzro_trainer.data.hashing`) covers them.

**Same bits on every machine.** A KernelSynth draw goes through OpenBLAS (the Cholesky factor and
a matrix-vector product) and NumPy's vector loops (the kernels' ``exp`` and ``sin``), whose last
bits follow the BLAS thread count, the BLAS kernel chosen for the CPU and NumPy's SIMD level
(measured: each of ``OPENBLAS_NUM_THREADS=1``, ``OPENBLAS_CORETYPE=Haswell`` and AVX-512 turned
off gave another dataset hash on the same machine; a fresh machine built another mixture hash
than the one recorded). So the draws run in a child process with one pinned numeric environment
(:data:`PINNED_NUMERICS`: one BLAS thread, OpenBLAS's Haswell kernels, NumPy without its AVX-512
loops): on any x86-64 CPU with AVX2 and FMA and the locked NumPy / OpenBLAS / scikit-learn, the
same seed gives the same bits, hence the same dataset hash (``tests/trainer/test_mixture.py``
builds it under several outer environments). Other architectures (ARM) get other bits.

Usage::

    ks = kernel_synth(n_series=100, length=1024, seed=0)          # long format, ids kernelsynth/0000...
    tr = trend_season(n_series=100, seed=0)                        # ids trendseason/0000..., own frequencies
    mix = ts_mixup(real_df, n_series=100, seed=0)                  # ids tsmixup/0000...
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from tenzro_trainer.errors import DataError

PERIODS = (24, 48, 96, 168, 336, 672, 7, 14, 30, 60, 365, 730, 4, 26, 52, 6, 12, 40, 10)
SYNTH_START = pd.Timestamp("2000-01-01")


def _pinned_numerics() -> dict[str, str]:
    """The environment KernelSynth's draws run in (see the module docstring): one BLAS thread,
    OpenBLAS's Haswell (AVX2) kernels, and every AVX-512 loop of this NumPy build turned off."""
    from numpy.core._multiarray_umath import __cpu_dispatch__

    return {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            "OPENBLAS_CORETYPE": "Haswell",
            "NPY_DISABLE_CPU_FEATURES": " ".join(f for f in __cpu_dispatch__ if f.startswith("AVX512"))}


PINNED_NUMERICS = _pinned_numerics()


def _kernel_bank(length: int) -> list:
    """The KernelSynth bank (sklearn kernels) for series of ``length`` points on [0, 1]."""
    from sklearn.gaussian_process.kernels import (
        RBF,
        ConstantKernel,
        DotProduct,
        ExpSineSquared,
        RationalQuadratic,
        WhiteKernel,
    )

    bank = [ExpSineSquared(periodicity=p / length) for p in PERIODS]
    bank += [DotProduct(sigma_0=s) for s in (0.0, 1.0, 10.0)]
    bank += [RBF(length_scale=s) for s in (0.1, 1.0, 10.0)]
    bank += [RationalQuadratic(alpha=a) for a in (0.1, 1.0, 10.0)]
    bank += [WhiteKernel(noise_level=s) for s in (0.1, 1.0)]
    bank += [ConstantKernel()]
    return bank


def _gp_sample(cov: np.ndarray, rng: np.random.RandomState) -> np.ndarray:
    """One draw from N(0, cov) (Cholesky with a growing jitter); ``cov`` is not modified."""
    length = len(cov)
    jitter = 1e-6 * max(1.0, float(np.mean(np.diag(cov))))
    for _ in range(6):
        try:
            chol = np.linalg.cholesky(cov + jitter * np.eye(length))
            return chol @ rng.standard_normal(length)
        except np.linalg.LinAlgError:
            jitter *= 10
    raise DataError("KernelSynth: covariance not positive definite after jitter")  # pragma: no cover


def kernel_synth(n_series: int, length: int = 1024, max_kernels: int = 5, seed: int = 0,
                 freq: str = "h") -> pd.DataFrame:
    """``n_series`` KernelSynth series (see the module docstring) in long format.

    Each bank kernel's covariance on the grid is computed once (at most 31 float64 matrices of
    ``length`` x ``length``, 8 MiB each at 1024) and composites are combined from them with the
    same elementwise ``+`` / ``*`` sklearn's ``Sum`` / ``Product`` apply, so the series are the
    same bits as evaluating each composite kernel afresh.

    The draws run under :data:`PINNED_NUMERICS` (a child process unless this one already is), so
    the result is the same bits on every x86-64 machine with AVX2 (module docstring).

    Returns:
        columns ``unique_id`` (``kernelsynth/0000``, ...), ``ds`` (from 2000-01-01, ``freq``), ``y`` float64.
    Raises:
        DataError: the child process failed.
    """
    ys = _pinned_draws("kernelsynth", n_series=n_series, length=length, max_kernels=max_kernels, seed=seed)
    ds = pd.date_range(SYNTH_START, periods=length, freq=freq)
    return pd.concat([pd.DataFrame({"unique_id": f"kernelsynth/{i:04d}", "ds": ds, "y": y}) for i, y in enumerate(ys)],
                     ignore_index=True)


def _pinned_draws(generator: str, **kwargs) -> np.ndarray:
    """``generator``'s draws (a name of `_GENERATORS`) under :data:`PINNED_NUMERICS`: in this
    process when it already runs under them, else in a child process (the variables must be set
    before NumPy loads its BLAS and picks its loops).

    Raises:
        DataError: the child failed (its stderr's last line named).
    """
    if all(os.environ.get(k) == v for k, v in PINNED_NUMERICS.items()):
        return _GENERATORS[generator](**kwargs)
    with tempfile.TemporaryDirectory(prefix=f"{generator}-") as tmp:
        out = Path(tmp) / "draws.npy"
        args = json.dumps({"generator": generator, **kwargs})
        res = subprocess.run([sys.executable, "-m", "tenzro_trainer.data.synthetic", args, str(out)],
                             env={**os.environ, **PINNED_NUMERICS}, capture_output=True, text=True)
        if res.returncode != 0 or not out.exists():
            last = (res.stderr.strip().splitlines() or ["no output"])[-1]
            raise DataError(f"{generator}: the pinned-numerics child failed (exit {res.returncode}): {last}")
        return np.load(out)


def _draws(n_series: int, length: int, max_kernels: int, seed: int) -> np.ndarray:
    """The KernelSynth draws, float64 ``(n_series, length)``, in this process's numerics."""
    rng = np.random.RandomState(seed)
    bank = _kernel_bank(length)
    x = np.linspace(0, 1, length)[:, None]
    covs: dict[int, np.ndarray] = {}

    def cov_of(i: int) -> np.ndarray:
        if i not in covs:
            covs[i] = bank[i](x)
        return covs[i]

    ys = np.empty((n_series, length))
    for i in range(n_series):
        picks = rng.randint(len(bank), size=rng.randint(1, max_kernels + 1))
        cov = cov_of(picks[0])
        for p in picks[1:]:
            cov = cov + cov_of(p) if rng.rand() < 0.5 else cov * cov_of(p)
        ys[i] = _gp_sample(cov, rng)
    return ys


#: TrendSeason's frequencies: (pandas frequency, season in steps, share of the series)
TREND_SEASON_FREQS = (("YS", 1, 0.30), ("QS", 4, 0.25), ("MS", 12, 0.25), ("W", 52, 0.05), ("D", 7, 0.075),
                      ("h", 24, 0.075))
# steps a year of each of TREND_SEASON_FREQS: version 2 scales the drift and the level's walk by it
TREND_SEASON_STEPS_A_YEAR = (1, 4, 12, 52, 365, 8760)
TREND_SEASON_START = pd.Timestamp("1700-01-01")  # 512 yearly steps stay inside pandas' timestamps


def trend_season(n_series: int, min_len: int = 24, max_len: int = 512, seed: int = 0,
                 version: int = 1) -> pd.DataFrame:
    """``n_series`` TrendSeason series (see the module docstring) in long format, each with the
    dates of its drawn frequency from 1700-01-01. The draws run under :data:`PINNED_NUMERICS`, as
    KernelSynth's (its ``exp`` and ``sin`` go through NumPy's vector loops).

    ``version`` 1 is the prior of the module docstring (the recipe's); version 2 draws the drift per
    step with std 0.08 log units times the frequency's steps a year to the power -0.75, and the
    level's walk times them to the power -0.5, where version 1 drew both alike for yearly and hourly
    series (a drift std of 0.03 a step), and gives half the seasonal series a free profile (m normal
    draws: peaks and troughs) instead of 1-3 harmonics.
    Measured no better on the zero-shot set (trainer/benchmarks/results/zero_shot_levers.md).

    Returns:
        columns ``unique_id`` (``trendseason/0000``, ...), ``ds``, ``y`` float64.
    Raises:
        DataError: ``min_len`` < 2 or above ``max_len``, an unknown ``version``; the child process failed.
    """
    if not 2 <= min_len <= max_len:
        raise DataError(f"TrendSeason: lengths must satisfy 2 <= min_len <= max_len, got {min_len}, {max_len}")
    if version not in (1, 2):
        raise DataError(f"TrendSeason: version must be 1 or 2, got {version!r}")
    flat = _pinned_draws("trendseason", n_series=n_series, min_len=min_len, max_len=max_len, seed=seed,
                         version=version)
    frames, pos = [], 0
    for i in range(n_series):
        f, n = int(flat[pos]), int(flat[pos + 1])
        frames.append(pd.DataFrame({"unique_id": f"trendseason/{i:04d}",
                                    "ds": pd.date_range(TREND_SEASON_START, periods=n, freq=TREND_SEASON_FREQS[f][0]),
                                    "y": flat[pos + 2 : pos + 2 + n]}))
        pos += 2 + n
    return pd.concat(frames, ignore_index=True)


def _trend_season_draws(n_series: int, min_len: int, max_len: int, seed: int, version: int = 1) -> np.ndarray:
    """TrendSeason's draws in this process's numerics, flat float64: per series its frequency
    index, its length n and its n values (``version``: see :func:`trend_season`)."""
    rng = np.random.RandomState(seed)
    share = np.array([f[2] for f in TREND_SEASON_FREQS])
    out = []
    for _ in range(n_series):
        f = int(rng.choice(len(TREND_SEASON_FREQS), p=share / share.sum()))
        m = TREND_SEASON_FREQS[f][1]
        # version 2: drift and walk per step shrink with the steps a year; version 1 drew both alike
        # for every frequency
        per_step = 1.0 if version == 1 else TREND_SEASON_STEPS_A_YEAR[f] ** -0.75
        n = int(np.exp(rng.uniform(np.log(min_len), np.log(max_len))))
        t = np.arange(n, dtype="float64")
        drift = rng.normal(0, 0.03 if version == 1 else 0.08 * per_step) * (rng.rand() < 0.8)  # log units per step
        phi = 1.0 if rng.rand() < 0.5 else rng.uniform(0.8, 0.99)  # damping of the drift
        trend = drift * (np.cumsum(phi**t) - 1.0) if phi < 1 else drift * t
        walk = np.exp(rng.uniform(np.log(0.002), np.log(0.08))) * (rng.rand() < 0.7) * per_step ** (2 / 3)
        level = np.cumsum(rng.normal(0, walk, n))
        seasonal = np.zeros(n)
        if m > 1 and rng.rand() < 0.85:
            if version == 2 and rng.rand() < 0.5:  # a free seasonal profile: peaks, troughs, steps
                profile = rng.normal(0, 1, m)
                profile -= profile.mean()
                seasonal = rng.uniform(0, 0.5) / profile.std() * profile[(t.astype(int) + rng.randint(m)) % m]
            else:
                for k in range(1, rng.randint(1, 4) + 1):
                    if 2 * k > m:
                        break
                    seasonal += rng.uniform(0, 0.4) / k * np.sin(2 * np.pi * k * t / m + rng.uniform(0, 2 * np.pi))
        noise = rng.normal(0, np.exp(rng.uniform(np.log(0.005), np.log(0.15))), n)
        rho = rng.uniform(-0.3, 0.8)
        for j in range(1, n):  # AR(1)
            noise[j] += rho * noise[j - 1]
        z = trend + level + seasonal + noise
        if rng.rand() < 0.6:
            y = np.exp(z) * np.exp(rng.uniform(0, 8))  # multiplicative, positive
        else:
            y = z * np.exp(rng.uniform(0, 5)) + rng.normal(0, 10)  # additive
        out += [float(f), float(n), *y]
    return np.asarray(out)


def ts_mixup(df: pd.DataFrame, n_series: int, max_mix: int = 3, min_len: int = 128, max_len: int = 1024,
             alpha: float = 1.5, seed: int = 0, reserve_frac: float = 0.1, reserve_min: int = 128,
             freq: str = "h") -> pd.DataFrame:
    """``n_series`` TSMixup mixtures of the series of ``df`` (see the module docstring).

    Only the first part of each source is used: its last ``max(reserve_min, reserve_frac * len)``
    points are left out, so mixtures never contain the held-out tails the in-distribution
    evaluation scores (:func:`tenzro_trainer.data.windows.train_heldout_split`). Sources left with
    fewer than 16 points are skipped.

    Raises:
        DataError: no usable source series.
    """
    from tenzro_trainer.data.windows import series_arrays  # here: the pinned child needs no PyTorch

    arrays = {u: y[: len(y) - max(reserve_min, int(reserve_frac * len(y)))] for u, y in series_arrays(df).items()}
    sources = [arrays[u] for u in sorted(arrays) if len(arrays[u]) >= 16]
    if not sources:
        raise DataError("TSMixup: no source series with at least 16 points before its reserved tail")
    rng = np.random.RandomState(seed)
    frames = []
    for i in range(n_series):
        k = rng.randint(1, max_mix + 1)
        length = rng.randint(min_len, max_len + 1)
        parts = []
        for j in rng.randint(len(sources), size=k):
            y = sources[j]
            n = min(length, len(y))
            start = rng.randint(0, len(y) - n + 1)
            w = y[start : start + n]
            parts.append(w / max(float(np.mean(np.abs(w))), 1e-8))
        n = min(len(p) for p in parts)
        lam = rng.dirichlet(np.full(k, alpha))
        y = sum(l * p[-n:] for l, p in zip(lam, parts))
        frames.append(pd.DataFrame({"unique_id": f"tsmixup/{i:04d}",
                                    "ds": pd.date_range(SYNTH_START, periods=n, freq=freq), "y": y}))
    return pd.concat(frames, ignore_index=True)


__all__ = ["PERIODS", "PINNED_NUMERICS", "TREND_SEASON_FREQS", "kernel_synth", "trend_season", "ts_mixup"]


#: the draws `_pinned_draws` runs, by name (the child process is told the name)
_GENERATORS = {"kernelsynth": _draws, "trendseason": _trend_season_draws}


if __name__ == "__main__":  # the pinned-numerics child (`_pinned_draws`): args JSON, output .npy path
    _kw = json.loads(sys.argv[1])
    np.save(sys.argv[2], _GENERATORS[_kw.pop("generator")](**_kw))
