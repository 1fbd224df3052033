"""Using what a run paid for: ``tenzro train export-model`` and ``tenzro forecast``.

- ``tenzro train export-model --task-id ID --out DIR [--average-last K [--average-stride S]]``: the
  sealed run's final global weights, fetched from IPFS (the CIDs and hashes of the last round's
  ``RoundCommitted`` transcript), checked against the receipt's final model hash (the weights root of
  the last round, ``receipt.weights_root``), written as ``DIR/model.safetensors`` +
  ``DIR/config.json`` (:mod:`tenzro_trainer.model_dir`); with ``--average-last`` the average of the
  last K rounds' weights (S rounds apart), each checked against its round's committed weights root.
- ``tenzro forecast (--task-id ID | --model DIR)... --input data.csv --h N [--quantiles 0.1,0.5,0.9]
  [--plot out.png] [--output out.csv] [--no-flip-invariant] [--no-infer-positive]``: reads Nixtla
  long format (``unique_id, ds, y``), writes ``unique_id, ds, yhat, q-0.1, ...`` (``yhat`` = the
  median), to stdout or ``--output``. Several ``--task-id`` / ``--model`` make an ensemble: the mean
  of the members' quantiles, level by level (`tenzro_trainer.forecast.forecast_ensemble`), e.g. the
  sealed models of runs that differ in their seed.
  Forecasts are flip-invariant unless ``--no-flip-invariant``: each the mean of the model's forecast
  and the negated forecast of the negated series (TimesFM 2.5's ``force_flip_invariance``); a series
  with no negative value gets no negative quantile unless ``--no-infer-positive`` (``infer_is_positive``).

Errors are one line each (``Error: ...``, exit 1): run not sealed, final weights that do not match
the receipt, a series with too short a history, time stamps whose frequency cannot be inferred.

Usage::

    tenzro train export-model --task-id 0x… --out model/
    tenzro forecast --model model/ --input history.csv --h 24 --quantiles 0.1,0.5,0.9 --plot fc.png
    tenzro forecast --task-id 0x…a --task-id 0x…b --input history.csv --h 24    # a 2-member ensemble
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import click
import numpy as np
import pandas as pd

from tenzro_operator.errors import TenzroError

MIN_POINTS = 10  # shortest history `tenzro forecast` accepts per series


class ForecastError(TenzroError):
    """`tenzro forecast` / `export-model` cannot proceed; the message says why, in one line."""


# ------------------------------------------------------------------------------ export


def export_model(chain, ipfs, task_id: bytes, out: Path, average_last: int = 1, average_stride: int = 1) -> dict:
    """Fetch, check and write the final model of a sealed run (see the module docstring).

    With ``average_last`` K > 1 the model is the average (`tenzro_trainer.model_dir.average_weights`)
    of the global weights of rounds ``last, last - stride, ..., last - (K - 1) x stride``: each
    round's weights are checked against the weights root of its ``RoundCommitted`` event, the last
    round's also against the receipt; ``config.json``'s provenance lists the rounds and their roots,
    so anyone holding the run's transcripts makes the same file.

    Returns:
        the written ``config.json`` as a dict.
    Raises:
        ForecastError: the run does not exist or is not sealed, a round's commit is missing, or the
            rounds to average do not exist (K x stride reaches before round 0, or K < 1).
        WeightsError: the fetched weights do not match the receipt's final model hash (or an
            averaged round's, its committed weights root).
        RpcUnavailable / IpfsUnavailable: the chain or IPFS node does not answer.
    """
    from tenzro_operator.chain import RunStatus
    from tenzro_operator.errors import ChainRevert
    from tenzro_operator.task_assets import fetch_spec, fetch_weights
    from tenzro_operator.task_runtime import TaskRuntime, WeightsError
    from tenzro_trainer.model_dir import average_weights, save_model_dir

    hx = "0x" + bytes(task_id).hex()
    try:
        run = chain.get_run(task_id)
    except ChainRevert as exc:
        raise ForecastError(f"no run with task id {hx} on this registry ({exc})") from None
    if run.status != RunStatus.SEALED:
        raise ForecastError(f"run {hx} is {run.status.name}, not SEALED: it has no final model yet "
                            f"(round {run.current_round} of {run.max_rounds})")
    rec = chain.get_receipt(task_id)
    spec = fetch_spec(ipfs, run.spec_cid, run.spec_hash)
    runtime = TaskRuntime.from_spec(spec)
    last = run.max_rounds - 1
    rounds = [last - k * average_stride for k in range(average_last)]
    if average_last < 1 or average_stride < 1 or rounds[-1] < 0:
        raise ForecastError(f"cannot average the last {average_last} rounds {average_stride} apart: run {hx} has "
                            f"rounds 0 to {last}")
    start = chain.run_start_block(run)
    from tenzro_operator.root_flow import RootFlowError, committed_round, committed_weights

    states, roots = [], []
    for r in rounds:
        try:
            event = committed_round(chain, task_id, start, r)
            cids, hashes = committed_weights(ipfs, event)
        except RootFlowError as exc:
            raise ForecastError(f"run {hx}: {exc}") from None
        # a round's weights root is over the weights' §2 roots (PROTOCOL.md §5); the last one's is the
        # receipt's final model hash
        root = bytes(rec.final_model_hash) if r == last else bytes(event["weightsRoot"])
        try:
            states.append(fetch_weights(ipfs, runtime, cids, hashes, root, chunk_roots=True)[0])
        except WeightsError as exc:
            what = "the receipt's final model hash" if r == last else f"round {r}'s committed weights root"
            raise WeightsError(f"weights of round {r} of run {hx} do not match {what} 0x{root.hex()}: {exc}") from None
        roots.append("0x" + root.hex())
    provenance = {"task_id": hx, "final_model_hash": "0x" + bytes(rec.final_model_hash).hex(),
                  "spec_hash": "0x" + bytes(run.spec_hash).hex(), "spec_cid": run.spec_cid,
                  "run_root": "0x" + bytes(rec.run_root).hex(), "rounds": run.max_rounds,
                  "chain_id": chain.chain_id, "dataset_ref": spec.dataset_ref, "dataset_hash": spec.dataset_hash}
    if len(rounds) > 1:
        provenance["averaged_rounds"] = {"rounds": rounds, "weights_roots": roots}
    save_model_dir(out, states[0] if len(states) == 1 else average_weights(states), runtime.model_cfg, provenance)
    return json.loads((Path(out) / "config.json").read_text())


# ------------------------------------------------------------------------------ forecast


def _future_stamps(ds: pd.Series, h: int, uid: str, freq: str | None) -> pd.Index:
    """The ``h`` time stamps after a series' last one, at its (inferred or given) frequency."""
    if pd.api.types.is_datetime64_any_dtype(ds):
        f = freq or (pd.infer_freq(pd.DatetimeIndex(ds)) if len(ds) >= 3 else None)
        if f is None:
            raise ForecastError(f"series {uid!r}: cannot infer the frequency of its time stamps (irregular or "
                                f"missing steps); pass --freq (a pandas alias such as H, D, W-SUN, MS)")
        try:
            return pd.date_range(ds.iloc[-1], periods=h + 1, freq=f)[1:]
        except ValueError as exc:
            raise ForecastError(f"unknown frequency {f!r}: {exc}") from None
    steps = np.diff(ds.to_numpy())
    if len(steps) == 0 or (steps != steps[0]).any() or steps[0] <= 0:
        raise ForecastError(f"series {uid!r}: integer time stamps are not evenly spaced; cannot place the forecast")
    return pd.Index(ds.iloc[-1] + steps[0] * np.arange(1, h + 1))


def forecast_frame(models, df: pd.DataFrame, h: int, quantiles: tuple[float, ...], freq: str | None = None,
                   flip: bool = True, infer_positive: bool = True) -> pd.DataFrame:
    """Forecasts of every series of a long-format frame by ``models``: one model, or the members of
    an ensemble (the mean of their quantiles, `tenzro_trainer.forecast.forecast_ensemble`), with
    ``flip`` and ``infer_positive`` as `tenzro_trainer.forecast.forecast_histories`.

    Returns:
        ``unique_id, ds, yhat, q-<level>...``: ``h`` rows per series, ``yhat`` the median.
    Raises:
        ForecastError: a series shorter than ``MIN_POINTS`` observed points, or unplaceable time stamps.
    """
    from tenzro_trainer.forecast import forecast_ensemble

    levels = tuple(sorted(set(quantiles) | {0.5}))
    uids, hist, stamps = [], [], []
    for uid, g in df.groupby("unique_id", sort=True):
        y = g["y"].to_numpy(dtype="float64")
        n = int(np.sum(~np.isnan(y)))
        if n < MIN_POINTS:
            raise ForecastError(f"series {uid!r} has {n} observed points; at least {MIN_POINTS} are needed")
        uids.append(uid)
        hist.append(y)
        stamps.append(_future_stamps(g["ds"].reset_index(drop=True), h, uid, freq))
    fc = forecast_ensemble(models, hist, h, levels, flip=flip, infer_positive=infer_positive)  # (n, levels, h)
    rows = []
    for i, uid in enumerate(uids):
        part = {"unique_id": uid, "ds": stamps[i], "yhat": fc[i, levels.index(0.5)]}
        for j, q in enumerate(levels):
            if q in quantiles:
                part[f"q-{q:g}"] = fc[i, j]
        rows.append(pd.DataFrame(part))
    return pd.concat(rows, ignore_index=True)


def plot_forecast(history: pd.DataFrame, fc: pd.DataFrame, path: Path, max_series: int = 6) -> Path:
    """History tails, medians and the outermost quantile band, one panel per series (at most ``max_series``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    uids = sorted(fc["unique_id"].unique())[:max_series]
    qcols = sorted((c for c in fc.columns if c.startswith("q-")), key=lambda c: float(c[2:]))
    fig, axes = plt.subplots(len(uids), 1, figsize=(8, 2.4 * len(uids)), squeeze=False)
    for ax, uid in zip(axes[:, 0], uids):
        g, f = history[history["unique_id"] == uid], fc[fc["unique_id"] == uid]
        tail = g.iloc[-max(4 * len(f), 48):]
        ax.plot(tail["ds"], tail["y"], color="black", lw=1, label="history")
        ax.plot(f["ds"], f["yhat"], color="tab:blue", lw=1.5, label="median")
        if len(qcols) >= 2:
            ax.fill_between(f["ds"], f[qcols[0]], f[qcols[-1]], color="tab:blue", alpha=0.2,
                            label=f"{qcols[0][2:]}-{qcols[-1][2:]}")
        ax.set_title(uid, fontsize=9)
        ax.legend(fontsize=7, loc="upper left")
        if pd.api.types.is_datetime64_any_dtype(f["ds"]):
            loc = mdates.AutoDateLocator()
            ax.xaxis.set_major_locator(loc)
            ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(loc))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _quantiles(value: str) -> tuple[float, ...]:
    try:
        qs = tuple(float(x) for x in value.split(",") if x.strip())
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a comma-separated list of numbers", param_hint="--quantiles")
    if not qs or not all(0 < q < 1 for q in qs):
        raise click.BadParameter("quantiles must lie in (0, 1)", param_hint="--quantiles")
    return qs


# ------------------------------------------------------------------------------ registration


def register(cli: click.Group, train: click.Group) -> None:
    """Add ``export-model`` to ``tenzro train`` and ``forecast`` to ``tenzro``."""
    from tenzro_operator.cli.common import Ctx, common_options, echo_json, format_option, parse_task_id

    @train.command("export-model")
    @click.option("--task-id", required=True)
    @click.option("--out", "out", required=True, type=click.Path(file_okay=False, path_type=Path),
                  help="directory to write model.safetensors and config.json into")
    @click.option("--average-last", default=1, show_default=True, type=click.IntRange(min=1),
                  help="the model is the average of the global weights of this many rounds, ending with the last")
    @click.option("--average-stride", default=1, show_default=True, type=click.IntRange(min=1),
                  help="rounds between two averaged rounds")
    @format_option
    @common_options
    def export_model_cmd(ctx: Ctx, task_id: str, out: Path, average_last: int, average_stride: int, fmt: str) -> None:
        """Fetch the sealed run's final weights from IPFS, check them against the receipt's final
        model hash, write safetensors plus the model config (with --average-last, the average of
        several rounds' weights, each checked against its round's committed weights root)."""
        meta = export_model(ctx.chain(), ctx.ipfs(), parse_task_id(task_id), out, average_last, average_stride)
        if fmt == "json":
            echo_json({"out": str(out), **meta})
        else:
            averaged = meta["provenance"].get("averaged_rounds")
            what = f"the average of rounds {averaged['rounds']}" if averaged else "the final weights"
            click.echo(f"exported {meta['model']['family']} model of run {meta['provenance']['task_id']} to {out}: "
                       f"{what} (final model hash {meta['provenance']['final_model_hash']})")

    @cli.command("forecast")
    @click.option("--task-id", "task_ids", multiple=True,
                  help="a sealed run: export its final model, then forecast (repeat: an ensemble)")
    @click.option("--model", "model_dirs", multiple=True, type=click.Path(file_okay=False, path_type=Path),
                  help="a directory written by `tenzro train export-model` (repeat: an ensemble)")
    @click.option("--input", "input_path", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
                  help="history in Nixtla long format (unique_id, ds, y), CSV or Parquet")
    @click.option("--h", "h", required=True, type=click.IntRange(min=1), help="forecast horizon in steps")
    @click.option("--quantiles", default="0.1,0.5,0.9", show_default=True, help="comma-separated levels")
    @click.option("--freq", default=None, help="pandas frequency alias when it cannot be inferred")
    @click.option("--output", default=None, type=click.Path(dir_okay=False, path_type=Path),
                  help="CSV to write (default: stdout)")
    @click.option("--plot", default=None, type=click.Path(dir_okay=False, path_type=Path), help="PNG of the forecasts")
    @click.option("--flip-invariant/--no-flip-invariant", "flip", default=True, show_default=True,
                  help="average each forecast with the negated forecast of the negated series (twice the model calls)")
    @click.option("--infer-positive/--no-infer-positive", default=True, show_default=True,
                  help="no negative forecast for a series with no negative value")
    @common_options
    def forecast_cmd(ctx: Ctx, task_ids: tuple[str, ...], model_dirs: tuple[Path, ...], input_path: Path, h: int,
                     quantiles: str, freq: str | None, output: Path | None, plot: Path | None, flip: bool,
                     infer_positive: bool) -> None:
        """Forecast every series of a long-format file with a sealed run's model, or with the
        ensemble of several (the mean of their quantiles)."""
        from tenzro_trainer.data.loader import load_long_format
        from tenzro_trainer.errors import TrainerError
        from tenzro_trainer.model_dir import load_model_dir

        if not task_ids and not model_dirs:
            raise click.UsageError("pass --task-id or --model (each may be repeated: an ensemble)")
        qs = _quantiles(quantiles)
        try:
            df = load_long_format(input_path)
            with tempfile.TemporaryDirectory() as tmp:
                exported = [Path(tmp) / f"model-{i}" for i in range(len(task_ids))]
                for task_id, d in zip(task_ids, exported):
                    export_model(ctx.chain(), ctx.ipfs(), parse_task_id(task_id), d)
                models = [load_model_dir(d)[0] for d in (*exported, *model_dirs)]
            if not all(m.quantile_levels for m in models) and qs != (0.5,):
                # a point head has one forecast: its "quantiles" would all equal it (a band of zero width)
                click.echo("note: a model has a point head (no quantile levels): only yhat is written, no q- columns",
                           err=True)
                qs = ()
            if len(models) > 1:
                click.echo(f"an ensemble of {len(models)} models: the mean of their quantiles", err=True)
            fc = forecast_frame(models, df, h, qs, freq, flip, infer_positive)
        except TrainerError as exc:  # DataError / ConfigError: bad input file or model directory
            raise ForecastError(str(exc)) from None
        if output is None:
            fc.to_csv(sys.stdout, index=False)
        else:
            fc.to_csv(output, index=False)
            click.echo(f"wrote {len(fc)} rows ({fc['unique_id'].nunique()} series x {h} steps) to {output}", err=True)
        if plot is not None:
            plot_forecast(df, fc, plot)
            click.echo(f"wrote the plot to {plot}", err=True)


__all__ = ["ForecastError", "MIN_POINTS", "export_model", "forecast_frame", "plot_forecast", "register"]
