"""Data: Nixtla long-format loading, the default and extended real collections, dataset hashing,
sharding, train / held-out split by time and window sampling; the zero-shot collection
(:mod:`.heldout`), synthetic series (:mod:`.synthetic`) and the training mixture (:mod:`.mixture`).
See each submodule's docstring.
The names below load their submodule on first use (PEP 562), so a process that needs one of them
(the pinned-numerics child of :mod:`.synthetic`, a dataset hash) does not import PyTorch through
:mod:`.windows`."""

from __future__ import annotations

import importlib

_SUBMODULE = {
    "MANIFEST": "collection", "SeriesInfo": "collection", "default_collection": "collection",
    "extended_collection": "collection", "extended_manifest": "collection", "manifest": "collection",
    "seasonality": "collection",
    "dataset_hash": "hashing", "verify_dataset_hash": "hashing",
    "load_long_format": "loader", "validate_long_format": "loader", "write_long_format": "loader",
    "write_manifest": "manifest_file",
    "EvalWindows": "windows", "Split": "windows", "WindowDataset": "windows", "heldout_windows": "windows",
    "series_arrays": "windows", "shard_series": "windows", "train_heldout_split": "windows",
}

__all__ = sorted(_SUBMODULE)


def __getattr__(name: str):
    if name in _SUBMODULE:
        value = getattr(importlib.import_module(f"{__name__}.{_SUBMODULE[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_SUBMODULE))
