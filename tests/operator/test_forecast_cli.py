"""`tenzro forecast --model DIR` on a locally saved model (no chain): Nixtla long format in and out,
quantile columns, the plot, and one clear line for each bad input. (`--task-id` and
`tenzro train export-model` need a sealed devnet run: the end-to-end suite.)"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from click.testing import CliRunner

from tenzro_operator.cli.main import cli
from tenzro_trainer.config import QUANTILE_LEVELS, ModelConfig
from tenzro_trainer.forecast import forecast_ensemble, forecast_histories
from tenzro_trainer.model_dir import load_model_dir, save_model_dir
from tenzro_trainer.models import build_model


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    cfg = ModelConfig(family="chronos_bolt", context_len=64, horizon=16, patch_len=16, d_model=32, n_layers=2,
                      n_heads=4, d_ff=64, quantiles=QUANTILE_LEVELS, masked=True, min_context=8)
    torch.manual_seed(0)
    state = build_model(cfg).state_dict()
    return save_model_dir(tmp_path_factory.mktemp("model"), state, cfg, {"task_id": "0xlocal"})


@pytest.fixture
def history(tmp_path):
    t = np.arange(200)
    df = pd.concat([
        pd.DataFrame({"unique_id": "hourly", "ds": pd.date_range("2024-01-01", periods=200, freq="h"),
                      "y": 10 + np.sin(2 * np.pi * t / 24)}),
        pd.DataFrame({"unique_id": "monthly", "ds": pd.date_range("2000-01-01", periods=40, freq="MS"),
                      "y": np.linspace(100, 140, 40)}),
    ])
    path = tmp_path / "history.csv"
    df.to_csv(path, index=False)
    return path, df


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_forecast_with_a_model_dir(model_dir, history, tmp_path):
    path, df = history
    out, png = tmp_path / "fc.csv", tmp_path / "fc.png"
    res = run("forecast", "--model", str(model_dir), "--input", str(path), "--h", "30", "--quantiles", "0.1,0.5,0.9",
              "--output", str(out), "--plot", str(png))
    assert res.exit_code == 0, res.output
    fc = pd.read_csv(out, parse_dates=["ds"])
    assert list(fc.columns) == ["unique_id", "ds", "yhat", "q-0.1", "q-0.5", "q-0.9"]
    assert fc.groupby("unique_id").size().to_dict() == {"hourly": 30, "monthly": 30}
    hourly = fc[fc["unique_id"] == "hourly"]
    assert hourly["ds"].iloc[0] == pd.Timestamp("2024-01-01") + pd.Timedelta(hours=200)  # the next stamps
    assert fc[fc["unique_id"] == "monthly"]["ds"].iloc[0] == pd.Timestamp("2003-05-01")
    assert (fc["q-0.1"] <= fc["yhat"]).all() and (fc["yhat"] <= fc["q-0.9"]).all()
    np.testing.assert_allclose(fc["yhat"], fc["q-0.5"])
    # the CLI's numbers are the library's: same model, same histories, flip-invariant and positive by default
    model, meta = load_model_dir(model_dir)
    y = [df[df.unique_id == "hourly"]["y"].to_numpy()]
    lib = forecast_histories(model, y, 30, (0.1, 0.5, 0.9), flip=True, infer_positive=True)
    np.testing.assert_allclose(hourly[["q-0.1", "q-0.5", "q-0.9"]].to_numpy().T, lib[0], rtol=1e-6)
    plain = tmp_path / "plain.csv"
    assert run("forecast", "--model", str(model_dir), "--input", str(path), "--h", "30", "--no-flip-invariant",
               "--no-infer-positive", "--output", str(plain)).exit_code == 0
    got = pd.read_csv(plain).query("unique_id == 'hourly'")[["q-0.1", "q-0.5", "q-0.9"]].to_numpy().T
    np.testing.assert_allclose(got, forecast_histories(model, y, 30, (0.1, 0.5, 0.9))[0], rtol=1e-6)
    assert not np.allclose(got, lib[0], rtol=1e-6)
    assert meta["provenance"]["task_id"] == "0xlocal"
    assert png.stat().st_size > 10_000
    assert f"wrote 60 rows (2 series x 30 steps) to {out}" in res.output and f"wrote the plot to {png}" in res.output


def test_several_models_forecast_as_an_ensemble_the_mean_of_their_quantiles(model_dir, history, tmp_path):
    """Two `--model`s (say the sealed models of two runs that differ in their seed): each level is
    the members' mean of what each says alone, and the band stays ordered; one member is the model."""
    cfg = load_model_dir(model_dir)[1]["model"]
    torch.manual_seed(1)
    other = save_model_dir(tmp_path / "other", build_model(ModelConfig(**cfg)).state_dict(), ModelConfig(**cfg),
                           {"task_id": "0xother"})
    path, df = history
    cols = ["q-0.1", "q-0.5", "q-0.9"]
    outs = {}
    for name, dirs in (("a", [model_dir]), ("b", [other]), ("ab", [model_dir, other])):
        out = tmp_path / f"{name}.csv"
        res = run("forecast", *[a for d in dirs for a in ("--model", str(d))], "--input", str(path), "--h", "20",
                  "--output", str(out))
        assert res.exit_code == 0, res.output
        assert ("an ensemble of 2 models" in res.output) == (name == "ab")
        outs[name] = pd.read_csv(out)[cols].to_numpy()
    assert not np.allclose(outs["a"], outs["b"])  # two different members
    np.testing.assert_allclose(outs["ab"], (outs["a"] + outs["b"]) / 2, rtol=1e-6)
    assert (np.diff(outs["ab"], axis=1) >= 0).all()
    members = [load_model_dir(d)[0] for d in (model_dir, other)]
    y = [df[df.unique_id == "monthly"]["y"].to_numpy()]
    np.testing.assert_allclose(forecast_ensemble(members[:1], y, 20), forecast_histories(members[0], y, 20))


def test_a_point_head_model_writes_no_quantile_columns_and_says_so(history, tmp_path):
    """A point head has one forecast: q-0.1 / q-0.9 would equal the median (a band of zero width)."""
    cfg = ModelConfig(family="timesfm", context_len=64, horizon=16, patch_len=16, d_model=32, n_layers=2,
                      n_heads=4, d_ff=64)
    torch.manual_seed(0)
    point = save_model_dir(tmp_path / "point", build_model(cfg).state_dict(), cfg, {"task_id": "0xlocal"})
    path, _ = history
    out = tmp_path / "fc.csv"
    res = run("forecast", "--model", str(point), "--input", str(path), "--h", "8", "--output", str(out))
    assert res.exit_code == 0, res.output
    assert "point head" in res.output and "only yhat" in res.output
    assert list(pd.read_csv(out).columns) == ["unique_id", "ds", "yhat"]


def test_forecast_errors_are_one_line(model_dir, history, tmp_path):
    path, df = history
    short = tmp_path / "short.csv"
    df[df.unique_id == "hourly"].head(5).to_csv(short, index=False)
    res = run("forecast", "--model", str(model_dir), "--input", str(short), "--h", "4")
    assert res.exit_code == 1 and "has 5 observed points; at least 10" in res.output

    irregular = tmp_path / "irregular.csv"
    g = df[df.unique_id == "hourly"].iloc[[0, 1, 3, 7, 8, 20, 21, 22, 40, 41, 50, 90]]
    g.to_csv(irregular, index=False)
    res = run("forecast", "--model", str(model_dir), "--input", str(irregular), "--h", "4")
    assert res.exit_code == 1 and "cannot infer the frequency" in res.output
    res = run("forecast", "--model", str(model_dir), "--input", str(irregular), "--h", "4", "--freq", "h")
    assert res.exit_code == 0

    res = run("forecast", "--model", str(tmp_path), "--input", str(path), "--h", "4")
    assert res.exit_code == 1 and "is not a model directory" in res.output
    res = run("forecast", "--input", str(path), "--h", "4")
    assert res.exit_code != 0 and "pass --task-id or --model" in res.output

    tampered = tmp_path / "tampered"
    tampered.mkdir()
    for f in ("config.json", "model.safetensors"):
        (tampered / f).write_bytes((model_dir / f).read_bytes())
    blob = bytearray((tampered / "model.safetensors").read_bytes())
    blob[-1] ^= 1
    (tampered / "model.safetensors").write_bytes(bytes(blob))
    res = run("forecast", "--model", str(tampered), "--input", str(path), "--h", "4")
    assert res.exit_code == 1 and "sha256" in res.output and "Traceback" not in res.output


def test_an_average_of_weights_is_their_mean_in_float64_and_refuses_weights_that_differ():
    from tenzro_trainer.errors import ConfigError
    from tenzro_trainer.model_dir import average_weights

    a = {"w": torch.tensor([1.0, 16777216.0]), "b": torch.tensor([0.1])}
    b = {"w": torch.tensor([2.0, 1.0]), "b": torch.tensor([0.2])}
    c = {"w": torch.tensor([3.0, 1.0]), "b": torch.tensor([0.3])}
    avg = average_weights([a, b, c])
    # float64 sums: (2^24 + 1 + 1) / 3 in float32 arithmetic would lose both ones (2^24 + 1 == 2^24)
    assert avg["w"].dtype == torch.float32 and avg["w"].tolist() == [2.0, float(torch.tensor((16777216 + 2) / 3))]
    assert torch.equal(avg["b"], torch.tensor([0.2]))
    assert average_weights([a])["w"].tolist() == a["w"].tolist()
    with pytest.raises(ConfigError, match="no weights"):
        average_weights([])
    with pytest.raises(ConfigError, match="weights 1 differ"):
        average_weights([a, {"w": torch.zeros(3), "b": torch.zeros(1)}])
