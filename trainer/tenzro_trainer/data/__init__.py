"""Data: Nixtla long-format loading, the default and extended real collections, dataset hashing,
sharding, train / held-out split by time and window sampling; the zero-shot collection
(:mod:`.heldout`), synthetic series (:mod:`.synthetic`) and the training mixture (:mod:`.mixture`).
See each submodule's docstring."""

from tenzro_trainer.data.collection import (
    MANIFEST,
    SeriesInfo,
    default_collection,
    extended_collection,
    extended_manifest,
    manifest,
    seasonality,
)
from tenzro_trainer.data.hashing import dataset_hash, verify_dataset_hash
from tenzro_trainer.data.loader import load_long_format, validate_long_format, write_long_format
from tenzro_trainer.data.manifest_file import write_manifest
from tenzro_trainer.data.windows import (
    EvalWindows,
    Split,
    WindowDataset,
    heldout_windows,
    series_arrays,
    shard_series,
    train_heldout_split,
)

__all__ = [
    "MANIFEST",
    "EvalWindows",
    "SeriesInfo",
    "Split",
    "WindowDataset",
    "dataset_hash",
    "default_collection",
    "extended_collection",
    "extended_manifest",
    "heldout_windows",
    "load_long_format",
    "manifest",
    "seasonality",
    "series_arrays",
    "shard_series",
    "train_heldout_split",
    "validate_long_format",
    "verify_dataset_hash",
    "write_long_format",
    "write_manifest",
]
