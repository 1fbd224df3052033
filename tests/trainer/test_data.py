import numpy as np
import pandas as pd
import pytest

from tenzro_trainer.data import (
    MANIFEST,
    WindowDataset,
    dataset_hash,
    heldout_windows,
    load_long_format,
    shard_series,
    train_heldout_split,
    verify_dataset_hash,
    write_long_format,
)
from tenzro_trainer.errors import DataError, DatasetHashMismatch


def _user_frame():
    rng = np.random.default_rng(0)
    rows = []
    for uid in ("store_1", "store_2", "store_3"):
        ds = pd.date_range("2020-01-01", periods=150, freq="D")
        y = 10 + np.sin(np.arange(150) / 7 * 2 * np.pi) + rng.normal(0, 0.1, 150)
        rows.append(pd.DataFrame({"unique_id": uid, "ds": ds, "y": y}))
    return pd.concat(rows, ignore_index=True)


@pytest.mark.parametrize("ext", ["csv", "parquet"])
def test_loader_reads_user_files_and_hash_is_format_independent(tmp_path, ext):
    df = _user_frame()
    path = tmp_path / f"user.{ext}"
    if ext == "csv":
        df.sample(frac=1, random_state=1).assign(extra=1).to_csv(path, index=False)  # shuffled rows, extra column
    else:
        df.to_parquet(path, index=False)
    got = load_long_format(path)
    assert list(got.columns) == ["unique_id", "ds", "y"]
    assert got["unique_id"].nunique() == 3 and len(got) == 450
    assert got.groupby("unique_id")["ds"].apply(lambda s: s.is_monotonic_increasing).all()
    assert dataset_hash(got) == dataset_hash(df)
    out = write_long_format(got, tmp_path / "back.csv")
    assert dataset_hash(load_long_format(out)) == dataset_hash(df)


def test_loader_errors_are_clear(tmp_path):
    p = tmp_path / "bad.csv"
    pd.DataFrame({"id": ["a"], "ds": ["2020-01-01"], "y": [1.0]}).to_csv(p, index=False)
    with pytest.raises(DataError, match="missing column.*unique_id"):
        load_long_format(p)
    pd.DataFrame({"unique_id": ["a", "a"], "ds": ["2020-01-01", "2020-01-02"], "y": [1.0, "oops"]}).to_csv(p, index=False)
    with pytest.raises(DataError, match="not numeric.*oops"):
        load_long_format(p)
    pd.DataFrame({"unique_id": ["a", "a"], "ds": ["2020-01-01", "2020-01-01"], "y": [1.0, 2.0]}).to_csv(p, index=False)
    with pytest.raises(DataError, match="duplicate"):
        load_long_format(p)
    with pytest.raises(DataError, match="unknown file type"):
        load_long_format(tmp_path / "x.xlsx")


def test_dataset_hash_changes_with_data_and_verify():
    df = _user_frame()
    h = dataset_hash(df)
    assert len(h) == 64 and h == dataset_hash(df.iloc[::-1])
    changed = df.copy()
    changed.loc[17, "y"] += 1e-9
    assert dataset_hash(changed) != h
    renamed = df.replace({"unique_id": {"store_3": "store_4"}})
    assert dataset_hash(renamed) != h
    shifted = df.assign(ds=df["ds"] + pd.Timedelta(days=1))
    assert dataset_hash(shifted) != h
    assert verify_dataset_hash(df, "0x" + h.upper()) == h
    with pytest.raises(DatasetHashMismatch, match="dataset hash mismatch"):
        verify_dataset_hash(changed, h)


def test_default_collection_manifest(collection):
    rows = list(MANIFEST)
    assert len(rows) >= 30 and len({r.domain for r in rows}) >= 4
    assert collection["unique_id"].nunique() == len(rows)
    lengths = collection.groupby("unique_id").size()
    for r in rows:
        assert lengths[r.unique_id] == r.length
        assert r.source and r.licence and r.frequency in "HDWMQY"
    assert not collection["y"].isna().any()


def test_shards_are_deterministic_and_balanced():
    ids = [f"s{i}" for i in range(49)]
    a = shard_series(ids, 8)
    assert a == shard_series(list(reversed(ids)), 8)
    assert sorted(u for s in a for u in s) == sorted(ids)
    sizes = [len(s) for s in a]
    assert max(sizes) - min(sizes) <= 1
    with pytest.raises(DataError):
        shard_series(ids, 50)


def test_split_holds_out_the_tail(split):
    L, h = split.context_len, split.horizon
    for u in split.unique_ids:
        n = len(split.values[u])
        assert split.cut[u] >= L + h and n - split.cut[u] >= h
        tr = split.train(u)
        assert abs(tr.mean()) < 1e-6 and abs(tr.std() - 1) < 1e-6  # per-series scaling on the training part
    ev = heldout_windows(split, max_per_series=5)
    assert all(o >= split.cut[u] for u, o in zip(ev.series, ev.origin))
    ds = WindowDataset(split, seed=3)
    b1, b2 = ds.sample(16), WindowDataset(split, seed=3).sample(16)
    assert b1.shape == (16, L + h) and np.array_equal(b1.numpy(), b2.numpy())
    # every training window lies before the cut: its last value equals a training value of some series
    train_values = np.concatenate([split.train(u) for u in split.unique_ids]).astype("float32")
    assert np.isin(b1[:, -1].numpy(), train_values).all()


def test_committed_manifest_matches_the_collection():
    from pathlib import Path

    from tenzro_trainer.data import manifest

    path = Path(__file__).resolve().parents[2] / "trainer" / "DATA_MANIFEST.csv"
    committed = pd.read_csv(path)
    live = pd.DataFrame([(i.unique_id, i.length, i.frequency) for i in manifest()], columns=["unique_id", "length", "frequency"])
    pd.testing.assert_frame_equal(committed[["unique_id", "length", "frequency"]], live)


def test_the_committed_manifest_files_are_what_write_manifest_writes(tmp_path):
    """DATA_MANIFEST.md / .csv name the collections' series and dataset hashes: regenerated by
    `python -m tenzro_trainer.data.manifest_file trainer/`, they must not go stale."""
    from pathlib import Path

    from tenzro_trainer.data import write_manifest

    committed = Path(__file__).resolve().parents[2] / "trainer"
    for path in write_manifest(tmp_path):
        assert path.read_text() == (committed / path.name).read_text(), f"{path.name} is stale: regenerate it"
