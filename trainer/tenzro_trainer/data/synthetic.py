"""Synthetic training series: KernelSynth and TSMixup (Ansari et al. 2024, "Chronos: Learning the
Language of Time Series", arXiv:2403.07815, Sec. 4.1 and 4.2, Algorithms 1 and 2).

**KernelSynth** (Alg. 2): draw ``j ~ U{1, ..., max_kernels}`` kernels with replacement from a bank
of Gaussian-process kernels (linear, RBF, periodic, rational quadratic, white noise, constant),
combine them one by one with a random ``+`` or ``x``, and sample one series of ``length`` points
from the GP prior with the composite kernel on ``x = linspace(0, 1, length)``. The bank follows
the paper's: periodic kernels with the periods of common seasonalities (24, 48, 96, 168, 336,
672, 7, 14, 30, 60, 365, 730, 4, 26, 52, 6, 12, 40, 10 steps), RBF and rational quadratic length
scales 0.1, 1, 10, linear kernels with offsets 0, 1, 10, white noise 0.1 and 1.

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

from tenzro_trainer.data.windows import series_arrays
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
    if any(os.environ.get(k) != v for k, v in PINNED_NUMERICS.items()):
        ys = _draw_pinned(n_series, length, max_kernels, seed)
    else:
        ys = _draws(n_series, length, max_kernels, seed)
    ds = pd.date_range(SYNTH_START, periods=length, freq=freq)
    return pd.concat([pd.DataFrame({"unique_id": f"kernelsynth/{i:04d}", "ds": ds, "y": y}) for i, y in enumerate(ys)],
                     ignore_index=True)


def _draw_pinned(n_series: int, length: int, max_kernels: int, seed: int) -> np.ndarray:
    """`_draws` in a child process under :data:`PINNED_NUMERICS` (the variables must be set
    before NumPy loads its BLAS and picks its loops, so not in this process).

    Raises:
        DataError: the child failed (its stderr's last line named).
    """
    with tempfile.TemporaryDirectory(prefix="kernelsynth-") as tmp:
        out = Path(tmp) / "draws.npy"
        args = json.dumps({"n_series": n_series, "length": length, "max_kernels": max_kernels, "seed": seed})
        res = subprocess.run([sys.executable, "-m", "tenzro_trainer.data.synthetic", args, str(out)],
                             env={**os.environ, **PINNED_NUMERICS}, capture_output=True, text=True)
        if res.returncode != 0 or not out.exists():
            last = (res.stderr.strip().splitlines() or ["no output"])[-1]
            raise DataError(f"KernelSynth: the pinned-numerics child failed (exit {res.returncode}): {last}")
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


__all__ = ["PERIODS", "PINNED_NUMERICS", "kernel_synth", "ts_mixup"]


if __name__ == "__main__":  # the pinned-numerics child of `kernel_synth`: args JSON, output .npy path
    _kw = json.loads(sys.argv[1])
    np.save(sys.argv[2], _draws(_kw["n_series"], _kw["length"], _kw["max_kernels"], _kw["seed"]))
