"""Dataset hash: sha256 over a canonical encoding of a long-format frame.

Canonical encoding, version 1 (all integers little-endian):

    b"tenzro/train/dataset/v1\\n"
    for each series, in ascending order of the UTF-8 bytes of unique_id:
        u32  len(uid_utf8) ; uid_utf8
        u64  n (rows)
        u8   ds kind: 1 = datetime (int64 ns since 1970-01-01, naive UTC), 2 = integer
        n x i64  ds, ascending
        n x f64  y (IEEE-754 binary64; every NaN written as 0x7ff8000000000000)

Row order, column order, extra columns and the file format (CSV or Parquet) do not change the
hash; any change of a value, time stamp, or series name does.
"""

from __future__ import annotations

import hashlib
import struct

import numpy as np
import pandas as pd

from tenzro_trainer.data.loader import validate_long_format
from tenzro_trainer.errors import DatasetHashMismatch

DOMAIN = b"tenzro/train/dataset/v1\n"
_CANONICAL_NAN = np.frombuffer(struct.pack("<Q", 0x7FF8000000000000), dtype="<f8")[0]


def dataset_hash(df: pd.DataFrame) -> str:
    """Hex sha256 of the canonical encoding of ``df`` (long format, see the module docstring).

    Raises:
        DataError: ``df`` is not in long format.
    """
    df = validate_long_format(df)
    is_dt = pd.api.types.is_datetime64_any_dtype(df["ds"])
    h = hashlib.sha256(DOMAIN)
    uids = sorted(df["unique_id"].unique(), key=lambda u: u.encode("utf-8"))
    groups = dict(tuple(df.groupby("unique_id", sort=False)))
    for uid in uids:
        g = groups[uid]
        name = uid.encode("utf-8")
        ds = g["ds"].to_numpy().astype("datetime64[ns]").astype("<i8") if is_dt else g["ds"].to_numpy().astype("<i8")
        y = g["y"].to_numpy().astype("<f8").copy()
        y[np.isnan(y)] = _CANONICAL_NAN
        h.update(struct.pack("<I", len(name)) + name + struct.pack("<QB", len(g), 1 if is_dt else 2))
        h.update(ds.tobytes())
        h.update(y.tobytes())
    return h.hexdigest()


def verify_dataset_hash(df: pd.DataFrame, expected: str) -> str:
    """Check ``df`` against the spec's ``dataset_hash`` (hex, optional ``0x`` prefix, any case).

    Returns:
        the actual hash.
    Raises:
        DatasetHashMismatch: the hashes differ.
    """
    actual = dataset_hash(df)
    want = expected.lower().removeprefix("0x")
    if actual != want:
        raise DatasetHashMismatch(want, actual)
    return actual
