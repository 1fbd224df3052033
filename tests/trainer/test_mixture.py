"""Training data of the zero-shot recipes: the extended real collection, KernelSynth, TSMixup, the
mixture's weights and hash, and padded windows for short series."""

import numpy as np
import pandas as pd
import pytest
import torch

from tenzro_trainer.config import ModelConfig
from tenzro_trainer.data import dataset_hash, default_collection, train_heldout_split
from tenzro_trainer.data.collection import extended_collection, extended_manifest, seasonality
from tenzro_trainer.data.mixture import MixtureConfig, mixture_shares, training_mixture
from tenzro_trainer.data.synthetic import kernel_synth, trend_season, ts_mixup
from tenzro_trainer.data.windows import WindowDataset, heldout_windows
from tenzro_trainer.errors import DataError
from tenzro_trainer.models import build_model


def test_extended_collection_adds_real_series_with_manifest_rows():
    df, rows = extended_collection(), extended_manifest()
    base = default_collection()
    assert set(base["unique_id"]) < set(df["unique_id"])
    assert df["unique_id"].nunique() == len(rows) >= 90
    assert all(r.licence and r.source.startswith(("statsmodels/", "vega_datasets/")) for r in rows)
    assert seasonality(["danish_lrm", "fertility_ARG", "synthetic"]) == {"danish_lrm": 4, "fertility_ARG": 1,
                                                                          "synthetic": 1}
    # the default collection (the demo's dataset) is unchanged: its hash is the committed one
    assert dataset_hash(base) == "d6818790aac066e187f34ec732e088da9c58d35a06dd58676c355ec1b4c42e86"


def test_kernel_synth_is_deterministic_and_varied():
    a, b = kernel_synth(6, length=128, seed=3), kernel_synth(6, length=128, seed=3)
    pd.testing.assert_frame_equal(a, b)
    assert a["unique_id"].nunique() == 6 and (a.groupby("unique_id").size() == 128).all()
    assert not kernel_synth(6, length=128, seed=4)["y"].equals(a["y"])
    stds = a.groupby("unique_id")["y"].std()
    assert (stds > 0).all() and np.isfinite(a["y"]).all()


def test_trend_season_draws_short_series_of_every_frequency_that_persist_and_trend():
    a, b = trend_season(60, seed=3), trend_season(60, seed=3)
    pd.testing.assert_frame_equal(a, b)
    assert not trend_season(60, seed=4)["y"].equals(a["y"])
    sizes = a.groupby("unique_id").size()
    assert a["unique_id"].nunique() == 60 and sizes.between(24, 512).all() and np.isfinite(a["y"]).all()
    # yearly, quarterly and monthly series among them (the step between dates, in days)
    steps = {int(g["ds"].diff().dt.days.median()) for _, g in a.groupby("unique_id")}
    assert {365, 91, 31} <= steps
    # what the prior teaches: a series' next value is closer to its last one than to its mean
    # (persistence, the thing the recipe lacked on short yearly series)
    near_last = [abs(g["y"].iloc[-1] - g["y"].iloc[-2]) < abs(g["y"].iloc[-1] - g["y"].iloc[:-1].mean())
                 for _, g in a.groupby("unique_id")]
    assert np.mean(near_last) > 0.7
    with pytest.raises(DataError, match="min_len"):
        trend_season(1, min_len=30, max_len=20)


def test_trend_season_version_2_scales_the_trend_by_the_frequency_and_version_1_is_the_default():
    v1, v2 = trend_season(120, seed=3), trend_season(120, seed=3, version=2)
    pd.testing.assert_frame_equal(v1, trend_season(120, seed=3, version=1))
    assert not v2["y"].equals(v1["y"]) and np.isfinite(v2["y"]).all()

    def trend(df, days):  # median over the positive series of one frequency of |mean log step|: the drift
        out = []
        for _, g in df.groupby("unique_id"):
            step = g["ds"].diff().dt.total_seconds().median() / 86400
            if abs(step - days) < 0.2 * days and (g["y"] > 0).all():
                out.append(abs(np.diff(np.log(g["y"].to_numpy())).mean()))
        return np.median(out)

    # version 2: a yearly series trends per step far more than an hourly one; version 1 drew both alike
    assert trend(v2, 365) > 5 * trend(v2, 1 / 24)
    assert trend(v1, 365) < 3 * trend(v1, 1 / 24)
    with pytest.raises(DataError, match="version"):
        trend_season(1, version=3)


_HASH_IN_CHILD = (
    "import sys; from tenzro_trainer.data import dataset_hash; from tenzro_trainer.data.synthetic import kernel_synth,"
    " trend_season; print(dataset_hash(kernel_synth(8, length=256, seed=5)), dataset_hash(trend_season(40, seed=5)))")


def test_synthetic_series_are_the_same_bits_whatever_the_callers_numerics():
    """A fresh machine must rebuild the recorded mixture hash. Without the pinned child the BLAS
    thread count, OpenBLAS's kernel and NumPy's AVX-512 loops each changed the KernelSynth bits
    (measured on this machine); a caller started under each of them now gets one hash for
    KernelSynth and one for TrendSeason (its exp and sin run in the same child), and so does this
    process."""
    import os
    import subprocess
    import sys

    outer = [{}, {"OPENBLAS_NUM_THREADS": "2"}, {"OPENBLAS_CORETYPE": "Sandybridge"},
             {"NPY_DISABLE_CPU_FEATURES": "AVX2 FMA3"}]
    hashes = set()
    for extra in outer:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENBLAS_", "NPY_", "OMP_", "MKL_"))}
        res = subprocess.run([sys.executable, "-c", _HASH_IN_CHILD], env={**env, **extra}, capture_output=True,
                             text=True, check=True)
        hashes.add(res.stdout.strip())
    hashes.add(f"{dataset_hash(kernel_synth(8, length=256, seed=5))} {dataset_hash(trend_season(40, seed=5))}")
    assert len(hashes) == 1, hashes


def test_ts_mixup_mixes_scaled_windows_and_keeps_tails_out():
    t = np.arange(400)
    src = pd.concat([
        pd.DataFrame({"unique_id": "a", "ds": pd.date_range("2000", periods=400, freq="D"), "y": 100.0 + 0 * t}),
        pd.DataFrame({"unique_id": "b", "ds": pd.date_range("2000", periods=400, freq="D"), "y": 5.0 + (t >= 380) * 1e6}),
    ])
    mix = ts_mixup(src, 20, min_len=32, max_len=64, seed=0, reserve_frac=0.1, reserve_min=20)
    assert mix["unique_id"].nunique() == 20
    # sources are mean-scaled to 1 and mixed with weights summing to 1: a mixture of constants is 1;
    # b's last 20 points (1e6) are reserved and never appear
    np.testing.assert_allclose(mix["y"], 1.0)
    assert pd.testing.assert_frame_equal(mix, ts_mixup(src, 20, min_len=32, max_len=64, seed=0, reserve_frac=0.1,
                                                       reserve_min=20)) is None


def test_mixture_weights_are_series_shares_and_the_hash_covers_synthetic_series():
    cfg = MixtureConfig(real="default", weight_real=0.2, weight_tsmixup=0.4, weight_kernelsynth=0.2,
                        weight_trendseason=0.2, kernelsynth_length=64, tsmixup_max_len=128, trendseason_max_len=64)
    assert cfg.counts(49) == (98, 49, 49)
    assert MixtureConfig().counts(96) == (1056, 768, 2880)  # the recipe's defaults on the extended collection
    df = training_mixture(cfg)
    shares = mixture_shares(df)
    assert shares == pytest.approx({"real": 0.2, "tsmixup": 0.4, "kernelsynth": 0.2, "trendseason": 0.2}, abs=0.01)
    h = dataset_hash(df)
    assert h != dataset_hash(default_collection())
    changed = df.copy()
    i = changed.index[changed["unique_id"] == "kernelsynth/0000"][0]
    changed.loc[i, "y"] += 1e-9
    assert dataset_hash(changed) != h
    with pytest.raises(DataError):
        training_mixture(MixtureConfig(real="zero-shot"))


def test_padded_split_keeps_short_series_and_windows_pad_with_nan():
    ds = pd.date_range("2000", periods=300, freq="MS")
    df = pd.concat([
        pd.DataFrame({"unique_id": "long", "ds": ds, "y": np.sin(np.arange(300) / 3)}),
        pd.DataFrame({"unique_id": "short", "ds": ds[:40], "y": np.arange(40.0)}),
        pd.DataFrame({"unique_id": "tiny", "ds": ds[:5], "y": np.arange(5.0)}),
    ])
    legacy = train_heldout_split(df, 128, 16)
    assert legacy.unique_ids == ["long"] and not legacy.padded
    sp = train_heldout_split(df, 128, 16, min_context=8)
    assert sp.padded and sp.unique_ids == ["long", "short"] and sp.dropped == ["tiny"]
    assert sp.cut["short"] == 40 - 16 and sp.cut["long"] == 300 - 30  # tail max(h, 10%) while half stays
    assert train_heldout_split(df.assign(y=df.y), 128, 24, min_context=8).cut["short"] == 40  # 24 > 40/2: train only
    data = WindowDataset(sp, seed=0)
    w = data.sample(512)
    assert w.shape == (512, 144)
    observed_ctx = (~torch.isnan(w[:, :128])).sum(1)
    assert observed_ctx.min() >= 8  # never fewer than min_context observed points
    assert torch.isnan(w[:, :128]).any() and (~torch.isnan(w[:, 128])).all()  # first target step always observed
    # left padding only: once observed, a context stays observed to its end
    first = torch.argmax((~torch.isnan(w[:, :128])).int(), dim=1)
    assert all((~torch.isnan(w[i, first[i] : 128])).all() for i in range(len(w)))
    ev = heldout_windows(sp, 4)
    assert torch.isfinite(ev.target).all() and ev.context.shape[1] == 128
    cfg = ModelConfig(context_len=128, horizon=16, patch_len=16, d_model=32, n_layers=1, n_heads=4, d_ff=64,
                      quantiles=(0.1, 0.5, 0.9), masked=True, min_context=8)
    assert torch.isfinite(build_model(cfg).loss(w))
