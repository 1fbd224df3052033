"""Nixtla long format (``unique_id, ds, y``): read, check, write.

The format is the one of Nixtla's statsforecast / neuralforecast: one row per observation,
``unique_id`` names the series, ``ds`` the time stamp (datetime or integer), ``y`` the value.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from tenzro_trainer.errors import DataError

REQUIRED_COLUMNS = ("unique_id", "ds", "y")


def load_long_format(path: str | Path) -> pd.DataFrame:
    """Read a CSV (``.csv``, ``.csv.gz``) or Parquet (``.parquet``, ``.pq``) file in long format.

    Returns a frame with exactly the columns ``unique_id`` (str), ``ds`` (datetime64[ns] when
    parseable as dates, else int64), ``y`` (float64), sorted by ``(unique_id, ds)``. Missing
    ``y`` values stay NaN (they are interpolated when the series are turned into arrays).

    Raises:
        DataError: unreadable file, unknown extension, missing columns, non-numeric ``y``,
            unparseable ``ds`` or duplicate ``(unique_id, ds)`` rows; the message names the file.
    """
    path = Path(path)
    suffixes = "".join(path.suffixes[-2:]).lower()
    try:
        if path.suffix.lower() in (".parquet", ".pq"):
            df = pd.read_parquet(path)
        elif path.suffix.lower() == ".csv" or suffixes == ".csv.gz":
            df = pd.read_csv(path, float_precision="round_trip")  # exact floats: the hash depends on them
        else:
            raise DataError(f"{path}: unknown file type {path.suffix!r}; expected .csv, .csv.gz or .parquet")
    except DataError:
        raise
    except Exception as exc:  # noqa: BLE001 - any reader failure is bad user input
        raise DataError(f"{path}: cannot read as long-format timeseries: {exc}") from exc
    return validate_long_format(df, source=str(path))


def validate_long_format(df: pd.DataFrame, source: str = "<frame>") -> pd.DataFrame:
    """Check and canonicalize a long-format frame (see :func:`load_long_format`).

    Raises:
        DataError: as :func:`load_long_format`.
    """
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise DataError(
            f"{source}: missing column(s) {missing}; long format needs {list(REQUIRED_COLUMNS)}, "
            f"found {list(df.columns)}"
        )
    out = df.loc[:, list(REQUIRED_COLUMNS)].copy()
    out["unique_id"] = out["unique_id"].astype(str)
    y = pd.to_numeric(out["y"], errors="coerce")
    bad = y.isna() & out["y"].notna()
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise DataError(f"{source}: column y is not numeric: row {row} holds {out['y'].iloc[row]!r}")
    out["y"] = y.astype("float64")
    out["ds"] = _parse_ds(out["ds"], source)
    dup = out.duplicated(subset=["unique_id", "ds"])
    if dup.any():
        row = out[dup].iloc[0]
        raise DataError(
            f"{source}: {int(dup.sum())} duplicate (unique_id, ds) row(s), first: "
            f"unique_id={row['unique_id']!r}, ds={row['ds']!r}"
        )
    if out.empty:
        raise DataError(f"{source}: no rows")
    return out.sort_values(["unique_id", "ds"], kind="mergesort").reset_index(drop=True)


def _parse_ds(ds: pd.Series, source: str) -> pd.Series:
    if pd.api.types.is_datetime64_any_dtype(ds):
        return pd.to_datetime(ds).dt.tz_localize(None) if getattr(ds.dt, "tz", None) else ds.astype("datetime64[ns]")
    if pd.api.types.is_integer_dtype(ds):
        return ds.astype("int64")
    try:
        return pd.to_datetime(ds, format="mixed").astype("datetime64[ns]")
    except (ValueError, TypeError) as exc:
        raise DataError(f"{source}: column ds is neither integer nor a parseable date: {exc}") from exc


def write_long_format(df: pd.DataFrame, path: str | Path) -> Path:
    """Write a long-format frame as CSV or Parquet, chosen by the extension.

    Raises:
        DataError: unknown extension or a frame that is not in long format.
    """
    path = Path(path)
    df = validate_long_format(df)
    if path.suffix.lower() in (".parquet", ".pq"):
        df.to_parquet(path, index=False)
    elif path.suffix.lower() == ".csv":
        df.to_csv(path, index=False)
    else:
        raise DataError(f"{path}: unknown file type {path.suffix!r}; expected .csv or .parquet")
    return path
