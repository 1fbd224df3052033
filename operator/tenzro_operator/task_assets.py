"""The off-chain assets of a task, as every role fetches and checks them.

The chain stores the spec's sha256 and CID, and the weights root of the
round-0 weights; the spec names the dataset (`dataset_ref` = ipfs://CID) and
its `dataset_hash`, and lists the initial weights' CIDs and hashes. Every
fetch here checks what it got against what was committed and says which
commitment failed.
"""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd

from tenzro_operator.errors import IpfsContentError, TenzroError
from tenzro_operator.ipfs import IpfsClient
from tenzro_operator.spec import TaskSpec, spec_from_bytes
from tenzro_operator.task_runtime import TaskRuntime, WeightsError
from tenzro_trainer.data.hashing import dataset_hash, verify_dataset_hash
from tenzro_trainer.data.loader import load_long_format, validate_long_format

IPFS_SCHEME = "ipfs://"
MAX_SPEC_BYTES = 256 * 1024  # bytes: a task spec is a few kB of JSON
DEFAULT_MAX_DATASET_BYTES = 256 * 1024 * 1024  # bytes; the operator's config (max_dataset_bytes) may change it


class AssetError(TenzroError):
    """A task asset fetched from IPFS does not match its on-chain or in-spec commitment."""


def dataset_bytes(df: pd.DataFrame) -> bytes:
    """Long-format CSV bytes of `df` (what the sponsor pins as the task's dataset)."""
    buf = io.StringIO()
    validate_long_format(df).to_csv(buf, index=False)
    return buf.getvalue().encode()


def pin_dataset(ipfs: IpfsClient, df: pd.DataFrame) -> tuple[str, str]:
    """Pin `df` as CSV; returns (`ipfs://CID`, dataset_hash as 0x-hex)."""
    cid = ipfs.add(dataset_bytes(df))
    return IPFS_SCHEME + cid, "0x" + dataset_hash(df)


def fetch_spec(ipfs: IpfsClient, spec_cid: str, spec_hash: bytes) -> TaskSpec:
    """The spec at `spec_cid` (at most `MAX_SPEC_BYTES` bytes), checked against the on-chain
    `spec_hash` (sha256 of its canonical bytes).

    Raises:
        SpecError: a mismatch or an invalid spec. AssetError: the CID is not one, or names more
        than `MAX_SPEC_BYTES` bytes. IpfsNotFound / IpfsUnavailable: not retrievable.
    """
    try:
        raw = ipfs.cat(spec_cid, max_bytes=MAX_SPEC_BYTES)
    except IpfsContentError as exc:
        raise AssetError(f"task spec ipfs://{spec_cid}: {exc}") from exc
    return spec_from_bytes(raw, spec_hash, source=f"ipfs://{spec_cid}")


def fetch_dataset(ipfs: IpfsClient, spec: TaskSpec, max_bytes: int = DEFAULT_MAX_DATASET_BYTES) -> pd.DataFrame:
    """The task's dataset (at most ``max_bytes`` bytes of CSV), checked against `spec.dataset_hash`.

    Raises:
        AssetError: not an ipfs:// reference, not a CID, larger than ``max_bytes``, not long-format
            CSV, or another hash. IpfsNotFound / IpfsUnavailable: not retrievable.
    """
    if not spec.dataset_ref.startswith(IPFS_SCHEME):
        raise AssetError(f"dataset_ref {spec.dataset_ref!r} is not an ipfs:// reference")
    try:
        raw = ipfs.cat(spec.dataset_ref[len(IPFS_SCHEME):], max_bytes=max_bytes)
    except IpfsContentError as exc:
        raise AssetError(f"dataset {spec.dataset_ref}: {exc} (max_dataset_bytes={max_bytes})") from exc
    try:
        df = validate_long_format(pd.read_csv(io.BytesIO(raw), float_precision="round_trip"), source=spec.dataset_ref)
        verify_dataset_hash(df, spec.dataset_hash.removeprefix("0x"))
    except ValueError as exc:  # DataError, DatasetHashMismatch
        raise AssetError(f"dataset {spec.dataset_ref}: {exc}") from exc
    return df


def load_dataset(ipfs: IpfsClient, spec: TaskSpec, path: str | Path | None = None,
                 max_bytes: int = DEFAULT_MAX_DATASET_BYTES) -> pd.DataFrame:
    """The task's dataset from a local long-format file when `path` is given (an operator's copy),
    else from IPFS; either way checked against `spec.dataset_hash` (`AssetError` names the source)."""
    if path is None:
        return fetch_dataset(ipfs, spec, max_bytes)
    try:
        df = load_long_format(path)
        verify_dataset_hash(df, spec.dataset_hash.removeprefix("0x"))
    except ValueError as exc:  # DataError, DatasetHashMismatch
        raise AssetError(f"dataset_path {path}: {exc}") from exc
    return df


def fetch_weights(ipfs: IpfsClient, runtime: TaskRuntime, cids: list[str], hashes: list[bytes],
                  weights_root: bytes | None = None, chunk_roots: bool = False):
    """Global weights from F fragment blobs, each checked against its SHA-256 in ``hashes``, and
    the set against the committed `weights_root` when given: the RunRoot of the blobs' SHA-256,
    or with ``chunk_roots`` (a root-flow round's weights, PROTOCOL.md §5) of the §2 roots of the
    decoded fragments (`root_flow.chunk_weights_root`). Returns (state, blobs).

    Raises:
        WeightsError: a blob missing, not hashing to its entry, or the set not giving the root."""
    if len(cids) != len(runtime.fragments):
        raise WeightsError(f"expected {len(runtime.fragments)} fragment CIDs, got {len(cids)}")
    try:
        blobs = [ipfs.cat(c, max_bytes=runtime.payload_cap(f)) for f, c in enumerate(cids)]
    except IpfsContentError as exc:
        raise WeightsError(f"weights blob {exc.cid}: {exc}") from exc
    if weights_root is not None and not chunk_roots and TaskRuntime.weights_root(blobs) != weights_root:
        raise WeightsError(f"weights root of {cids} differs from the committed 0x{weights_root.hex()}")
    state = runtime.decode_weights(blobs, hashes)
    if weights_root is not None and chunk_roots:
        from tenzro_operator.root_flow import chunk_weights_root

        if chunk_weights_root(state, runtime.fragments) != weights_root:
            raise WeightsError(f"weights root (§2 roots) of {cids} differs from the committed 0x{weights_root.hex()}")
    return state, blobs


def initial_weights(ipfs: IpfsClient, spec: TaskSpec, runtime: TaskRuntime, weights_root: bytes):
    """Round 0's input weights named by the spec, checked against the on-chain initial weights root."""
    ws = spec.require_protocol().initial_weights
    return fetch_weights(ipfs, runtime, [w.cid for w in ws], [w.sha256_bytes for w in ws], weights_root)


def verify_assets(ipfs: IpfsClient, spec: TaskSpec, timeout_s: float = 20.0,
                  max_dataset_bytes: int = DEFAULT_MAX_DATASET_BYTES) -> None:
    """Check, before a spec is posted, that every asset it names can be fetched and is what it
    claims: the dataset (`dataset_ref`, against `dataset_hash`) and each initial weights blob
    (its CID, its sha256, and the model's layout for that fragment). ``timeout_s`` bounds each
    fetch (seconds); the dataset is read up to ``max_dataset_bytes`` bytes, each weights blob up
    to its fragment's `TaskRuntime.payload_cap`.

    Raises:
        AssetError: an asset is not retrievable or does not match, naming the spec field
            (``dataset_ref``, ``metadata.protocol.initial_weights[f]``) and why.
        IpfsUnavailable: no IPFS node answers.
    """
    from tenzro_operator.errors import IpfsUnavailable

    ws = spec.require_protocol().initial_weights
    where = "dataset_ref"
    try:
        if not spec.dataset_ref.startswith(IPFS_SCHEME):
            raise AssetError(f"dataset_ref {spec.dataset_ref!r} is not an ipfs:// reference")
        raw = ipfs.cat(spec.dataset_ref[len(IPFS_SCHEME):], timeout_s=timeout_s, max_bytes=max_dataset_bytes)
        try:
            df = validate_long_format(pd.read_csv(io.BytesIO(raw), float_precision="round_trip"),
                                      source=spec.dataset_ref)
            verify_dataset_hash(df, spec.dataset_hash.removeprefix("0x"))
        except ValueError as exc:  # DataError, DatasetHashMismatch, a CSV parser error
            raise AssetError(f"dataset_ref {spec.dataset_ref}: {exc}") from None
        runtime = TaskRuntime.from_spec(spec)
        blobs = []
        for f, w in enumerate(ws):
            where = f"metadata.protocol.initial_weights[{f}] ({w.cid})"
            blobs.append(ipfs.cat(w.cid, timeout_s=timeout_s, max_bytes=runtime.payload_cap(f)))
        where = "metadata.protocol.initial_weights"
        runtime.decode_weights(blobs, [w.sha256_bytes for w in ws])
    except IpfsUnavailable:
        raise
    except AssetError:
        raise
    except TenzroError as exc:  # IpfsNotFound / IpfsIntegrityError / WeightsError / SpecError
        raise AssetError(f"task spec {where}: {exc}") from None
