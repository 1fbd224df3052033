"""Where the explorer's figures come from: the chain (read-only), task specs on IPFS, and the
syncer's local round records.

- `ChainSource`: a `ChainClient` with no key, built on first use and again after a failed build,
  so the explorer starts (and shows a clear error page) while the RPC node is down.
- `SpecCache`: task specs fetched from IPFS and checked against the on-chain ``specHash``; kept
  by (CID, hash), since the bytes a CID names never change.
- `SyncerRecords`: the held-out loss per round from the syncer's ``syncer-rounds.jsonl`` files
  (`tenzro_operator.roles.syncer`): the loss is measured by the syncer and is in neither the
  chain nor the transcripts, so it is shown only when the operator points the explorer at them.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from tenzro_operator.errors import TenzroError

RPC_TIMEOUT_S = 5.0  # seconds per JSON-RPC request: a page waits at most about twice this
RPC_RETRIES = 2  # attempts per request: a page answers quickly when the node is down
MAX_SPEC_CACHE = 1024  # specs kept in memory (a few KiB each)


class ChainSource:
    """A read-only `ChainClient` for ``rpc_url`` and the deployment record, built lazily.

    Args:
        rpc_url: JSON-RPC endpoint of the chain.
        deployments: ``deployments/<network>.json``.
    """

    def __init__(self, rpc_url: str, deployments: Path) -> None:
        self.rpc_url, self.deployments = rpc_url, Path(deployments)
        self._client = None
        self._lock = threading.Lock()

    def client(self):
        """The `ChainClient` (no account).

        Raises:
            RpcUnavailable: the node does not answer. DeploymentError: the record is missing or
            describes another chain.
        """
        with self._lock:
            if self._client is None:
                from tenzro_operator.chain import ChainClient

                self._client = ChainClient(self.rpc_url, self.deployments, None, timeout_s=RPC_TIMEOUT_S,
                                           retries=RPC_RETRIES, backoff_s=0.2, replace_after_s=None)
            return self._client

    def reset(self) -> None:
        """Forget the client: the next page builds one again and re-runs the start-up checks (the
        node may have come back as another chain, e.g. a restarted devnet)."""
        with self._lock:
            self._client = None


class SpecCache:
    """Verified task specs by (CID, on-chain hash).

    Args:
        ipfs: an `IpfsClient`.
    """

    def __init__(self, ipfs) -> None:
        self.ipfs = ipfs
        self._specs: dict[tuple[str, bytes], Any] = {}
        self._lock = threading.Lock()

    def get(self, cid: str, spec_hash: bytes):
        """The `TaskSpec` at ``cid`` whose canonical bytes hash to ``spec_hash``.

        Raises:
            IpfsUnavailable: the IPFS node does not answer. TenzroError: not retrievable, not a
            spec, or another hash (the message says which).
        """
        from tenzro_operator.task_assets import fetch_spec

        key = (cid, bytes(spec_hash))
        with self._lock:
            if key in self._specs:
                return self._specs[key]
        spec = fetch_spec(self.ipfs, cid, bytes(spec_hash))
        with self._lock:
            if len(self._specs) >= MAX_SPEC_CACHE:
                self._specs.pop(next(iter(self._specs)))
            self._specs[key] = spec
        return spec


class SyncerRecords:
    """Held-out losses from the syncer's ``syncer-rounds.jsonl`` files, re-read on every call
    (they grow during a run).

    Args:
        paths: the files; a missing file counts as empty (the syncer has not finalized yet).
    """

    def __init__(self, paths: list[Path] | tuple[Path, ...] = ()) -> None:
        self.paths = [Path(p) for p in paths]

    def losses(self, task_hex: str) -> dict[int, dict[str, float]]:
        """``{round: {"heldout_loss": x, "heldout_loss_before": y?}}`` of task ``task_hex``
        (0x-hex bytes32) from every file; the last record of a round wins. Lines that are not
        JSON objects with a numeric loss are skipped."""
        out: dict[int, dict[str, float]] = {}
        for path in self.paths:
            try:
                lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise TenzroError(f"cannot read syncer records {path}: {exc}") from None
            for line in lines:
                rec = _loss_record(line, task_hex)
                if rec is not None:
                    out[rec[0]] = rec[1]
        return out


def _loss_record(line: str, task_hex: str) -> tuple[int, dict[str, float]] | None:
    try:
        rec = json.loads(line)
    except ValueError:
        return None
    if not isinstance(rec, dict) or str(rec.get("task", "")).lower() != task_hex.lower():
        return None
    r, loss = rec.get("round"), rec.get("heldout_loss")
    if not isinstance(r, int) or not isinstance(loss, (int, float)):
        return None
    vals = {"heldout_loss": float(loss)}
    if isinstance(rec.get("heldout_loss_before"), (int, float)):
        vals["heldout_loss_before"] = float(rec["heldout_loss_before"])
    return r, vals
