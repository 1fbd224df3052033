"""The zero-shot collection, its windows and metrics, and the statsforecast baselines."""

import numpy as np
import pytest

from tenzro_trainer.data import default_collection
from tenzro_trainer.data.collection import extended_manifest
from tenzro_trainer.data.heldout import check_disjoint, zero_shot_collection
from tenzro_trainer.errors import DataError
from tenzro_trainer.zeroshot import (
    QUANTILES,
    REFERENCE_RESULTS,
    MethodScores,
    ZeroShotTask,
    evaluate_forecaster,
    pinball,
    reference_figures,
    relative_summary,
    score_task,
    statsforecast_forecaster,
    window_origins,
    zero_shot_tasks,
)


@pytest.fixture(scope="module")
def zs():
    return zero_shot_collection()


def test_zero_shot_collection_is_large_diverse_and_disjoint(zs):
    df, infos = zs
    # issue #28: every frequency users forecast, yearly to hourly, at least 30 short series and 80 in all
    assert len(infos) >= 80 and len({i.domain for i in infos}) >= 4
    assert sum(i.length < 150 for i in infos) >= 30
    assert {"Y", "Q", "M", "W", "D", "H"} <= {i.frequency for i in infos}
    assert all(i.licence and i.source for i in infos)
    assert sorted(df["unique_id"].unique()) == [i.unique_id for i in infos]
    # no source file is shared with a training collection, and no series name either
    train_sources = {i.source.split(":")[0].split("/")[0] for i in extended_manifest()}
    zs_sources = {i.source.split(".")[0].split("/")[0] for i in infos}
    assert train_sources == {"statsmodels", "vega_datasets"} and not (train_sources & zs_sources)
    check_disjoint(default_collection()["unique_id"].unique())
    with pytest.raises(DataError, match="zero-shot series"):
        check_disjoint(["co2_maunaloa", infos[0].unique_id])
    with pytest.raises(DataError, match="zero-shot series"):
        check_disjoint(["co2_maunaloa", "promo_sales_weekly"])
    # every series varies inside its evaluation windows (a constant window makes MASE 0/0)
    for t in zero_shot_tasks(df, infos):
        assert all(np.ptp(t.y[o - t.horizon : o + t.horizon]) > 0 for o in t.origins), t.unique_id


def test_window_origins():
    o = window_origins(1000, 24, max_windows=10, test_frac=0.4)
    assert len(o) == 10 and o[-1] == 1000 - 24 and o[0] >= 1000 - 24 - 400
    assert min(np.diff(o)) >= 24  # non-overlapping
    assert window_origins(40, 18, max_windows=10) == [22]
    with pytest.raises(DataError):
        window_origins(20, 18)


def _task(y, origins, h=4, season=1):
    return ZeroShotTask("s", np.asarray(y, dtype="float64"), origins, h, season, "d", "H")


def test_score_task_mase_and_wql_by_hand():
    y = np.arange(20.0)  # lag-1 naive in-sample MAE = 1
    task = _task(y, [12, 16])
    fc = np.repeat(task.targets()[:, None, :] + 2.0, len(QUANTILES), axis=1)  # every quantile 2 too high
    s = score_task(task, fc)
    assert s["mase"] == pytest.approx(2.0)
    # pinball for d = -2: (1 - q) * 2; WQL = mean_q 2 * sum (1 - q) * 2 / sum |y|
    denom = task.targets().sum()
    want = np.mean([2 * 8 * (1 - q) * 2 / denom for q in QUANTILES])
    assert s["wql"] == pytest.approx(want)
    assert pinball(np.array([1.0]), np.array([0.0]), 0.9)[0] == pytest.approx(0.9)
    with pytest.raises(DataError, match="shape"):
        score_task(task, fc[:, :3])


def test_relative_summary_is_a_geometric_mean_of_ratios():
    a = MethodScores("a", {"x": {"mase": 1.0, "wql": 2.0}, "y": {"mase": 4.0, "wql": 1.0}})
    b = MethodScores("b", {"x": {"mase": 2.0, "wql": 1.0}, "y": {"mase": 2.0, "wql": 1.0}})
    r = relative_summary(a, b)
    assert r["mase"] == pytest.approx(1.0) and r["wql"] == pytest.approx(2 ** 0.5)


def test_seasonal_naive_is_exact_on_a_periodic_series_and_baselines_run():
    y = np.tile([1.0, 5.0, 3.0, 2.0], 40)
    task = _task(y, [120, 140], h=8, season=4)
    sn = evaluate_forecaster([task], statsforecast_forecaster("SeasonalNaive"))
    assert sn.per_series["s"]["mase"] == pytest.approx(0.0, abs=1e-9)
    rng = np.random.default_rng(0)
    noisy = _task(np.tile([1.0, 5.0, 3.0, 2.0], 40) + rng.normal(0, 0.3, 160) + 10, [120, 140], h=8, season=4)
    for name in ("AutoETS", "AutoTheta", "AutoARIMA"):
        fc = statsforecast_forecaster(name)(noisy.histories(), 8, 4, QUANTILES)
        assert fc.shape == (2, 9, 8) and (np.diff(fc, axis=1) >= -1e-9).all()
        assert score_task(noisy, fc)["mase"] < 1.5


def test_no_zero_shot_values_appear_in_a_training_collection(zs):
    """Leave-series-out by value, not only by name: no run of 16 consecutive values of a zero-shot
    series (rounded to 6 significant digits, at least 8 distinct ones: coarse sensor readings such
    as whole m/s of wind repeat by chance) occurs in the extended training collection."""
    from tenzro_trainer.data.collection import extended_collection

    def runs(y, k=16):
        r = np.array([float(f"{v:.6g}") for v in y])
        return {tuple(r[i : i + k]) for i in range(len(r) - k + 1) if len(set(r[i : i + k])) >= 8}

    train = set()
    for _, g in extended_collection().groupby("unique_id"):
        train |= runs(g["y"].to_numpy())
    df, infos = zs
    leaked = [u for u, g in df.groupby("unique_id") if runs(g["y"].to_numpy()) & train]
    assert not leaked


def test_the_original_set_stays_reachable():
    from tenzro_trainer.data.heldout import zero_shot_set_ids

    original, wide = zero_shot_set_ids("original"), zero_shot_set_ids("wide")
    assert len(original) == 31 and set(original) < set(wide)
    assert not any(u.startswith(("m1_", "m3_", "tourism_")) or u.endswith(("_daily", "_weekly")) for u in original)
    with pytest.raises(DataError, match="unknown zero-shot set"):
        zero_shot_set_ids("all")


def test_the_reference_figure_is_the_recorded_one(tmp_path):
    """The demo's summary puts the reference recipe's figure next to its own model's: it is the
    mean the committed results file ends with, and a missing or foreign file gives none."""
    ref = reference_figures()
    assert ref is not None and ref["rounds"] >= 1 and ref["models"] >= 2 and ref["members"] >= 1
    last = REFERENCE_RESULTS.with_suffix(".md").read_text().strip().splitlines()
    mase_line = next(line for line in last if line.startswith("zero-shot relative MASE"))
    assert float(mase_line.rsplit(":", 1)[1]) == pytest.approx(ref["relative_mase"], abs=5e-4)
    assert set(ref["baselines"]) == {"AutoETS", "AutoARIMA", "AutoTheta"}
    assert reference_figures(tmp_path / "absent.json") is None
    (tmp_path / "other.json").write_text('{"summary": {}}')
    assert reference_figures(tmp_path / "other.json") is None
