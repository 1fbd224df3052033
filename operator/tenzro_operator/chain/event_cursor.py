"""Event reading that a lagging node or a reorg can not fool: one cursor mechanism for every daemon.

`EventCursor` reads a contract's logs (some events, one task) forward from a block and returns
each new event once per canonical block, in chain order. Its position never moves past what was
actually read:

* blocks deeper than ``tail_blocks`` below the head are read with ranged ``eth_getLogs`` (a node
  lagging by less than that has them all);
* the recent tail is read block by block: the header by number (None: this node does not have
  the block yet, so the scan stops there, a *stale node*), then the logs by that header's hash
  (EIP-234: a node that does not know the hash answers an error, never an empty list), skipped
  when the header's ``logsBloom`` rules the contract and the task out;
* the hash of every tail block read is kept; before reading on, the last one is compared with
  the chain's (and each new header's ``parentHash`` with the previous hash). A mismatch is a
  *reorg*: the cursor walks back to the newest block whose hash still matches and rewinds to the
  block after it, so the new canonical blocks are read again; `CursorBatch.reorg_from` tells the
  caller which block its events from there on came from, to drop what it derived from them;
* ``confirmations`` keeps the cursor that many blocks behind the head (0 on a devnet, whose
  blocks come only with transactions).

The position, the tail hashes and a small ``extra`` dict of the caller's are saved with `save`
(JSON written atomically: temp file, fsync, rename, fsync of the folder), so a restarted daemon
resumes where it left off. Delivery is at least once (an event handled before a crash that
came before the save is read again), so handlers must be idempotent; `EventWatcher` adds
exactly-once dispatch on top for handlers that are not.

Usage::

    cursor = EventCursor(chain, ["RoundCommitted"], task_id=tid, start_block=b, path=dir / "c.json")
    batch = cursor.poll()            # CursorBatch(events, reorg_from, stale)
    if batch.reorg_from is not None: ...   # forget what came from blocks >= reorg_from
    for ev in batch.events: ...
    cursor.save()

`EventWatcher` polls a cursor, decodes and calls the handlers registered per event name, in chain
order, checkpointing after every handled event; a failing handler is logged, counted and retried
on the next poll (nothing after it is handled first), ``max_consecutive_failures`` failures in a
row raise `EventWatcherHalted` on purpose; the RPC endpoint down is ridden out for
``max_rpc_downtime_s`` seconds.

An event is a dict ``{"event", "args", "block_number", "block_hash", "tx_hash", "log_index"}``
(args decoded by name; bytes32 as ``bytes``; addresses checksummed).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from eth_bloom import BloomFilter

from tenzro_operator.errors import EventWatcherHalted, RpcUnavailable

__all__ = ["CursorBatch", "EventCursor", "EventWatcher", "Handler", "atomic_write_bytes"]

log = logging.getLogger("tenzro.events")

Handler = Callable[[dict[str, Any]], None]
_FORMAT = 2  # version of the cursor file


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` durably: a temp file beside it, fsync, ``os.replace``, fsync of
    the folder (a crash leaves the old file or the new one, never half of one)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f"{p.name}.tmp{os.getpid()}.{threading.get_ident()}")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, p)
    try:
        fd = os.open(p.parent, os.O_RDONLY)
    except OSError:  # a platform without directory handles: the rename is all we can do
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class CursorBatch:
    """What one `EventCursor.poll` read: ``events`` in chain order; ``reorg_from``: the first block
    a reorg replaced (the caller forgets what it derived from events at or after it), None when
    there was none; ``stale``: the node lacked a block the head promised (read again later)."""

    events: list[dict[str, Any]] = field(default_factory=list)
    reorg_from: int | None = None
    stale: bool = False


class EventCursor:
    """A verified, reorg-aware, restart-safe position in a contract's event stream (see the module
    docstring).

    Args:
        client: a `tenzro_operator.chain.ChainClient`.
        event_names: events to read (None: every event of the contract).
        contract: deployment name of the contract (default the registry).
        task_id: only events whose first indexed argument is this bytes32 task id.
        start_block: first block to read when there is no saved position.
        confirmations: blocks to stay behind the head.
        tail_blocks: how deep below the head blocks are read one by one and their hashes kept
            (the deepest reorg and the largest node lag it survives).
        max_range: blocks per ranged ``eth_getLogs`` request.
        path: JSON file of the saved position (loaded when it exists; `save` writes it).

    Raises:
        DeploymentError / ChainError: a misspelt event or contract name.
    """

    def __init__(self, client, event_names: Sequence[str] | None, *, contract: str = "TrainingRegistry",
                 task_id: bytes | None = None, start_block: int, confirmations: int = 0, tail_blocks: int = 64,
                 max_range: int = 2000, path: str | Path | None = None) -> None:
        self.client, self.contract, self.task_id = client, contract, task_id
        self.event_names = list(event_names) if event_names else None
        for name in self.event_names or []:
            client.event_topic(name, contract)  # fail fast on a misspelt event name
        self.confirmations, self.tail_blocks = max(0, confirmations), max(2, tail_blocks)
        self.max_range = max(1, max_range)
        self.path = Path(path) if path is not None else None
        self.start_block = max(0, start_block)
        self.next_block = self.start_block
        self.hashes: dict[int, str] = {}  # block number -> hash of the blocks read in the tail
        self.extra: dict[str, Any] = {}  # the caller's own state, saved with the position
        self.reorgs = self.stale_polls = 0
        self._bloom_items = client.log_bloom_items(self.event_names, contract, task_id)
        if self.path is not None:
            self._load()

    # -- position ---------------------------------------------------------------------------

    def rewind(self, block: int) -> None:
        """Read again from ``block`` on (never moves forward: a cursor passes only what it read)."""
        if block < self.next_block:
            self.next_block = max(0, block)
            self.hashes = {n: h for n, h in self.hashes.items() if n < self.next_block}

    def seek(self, block: int) -> None:
        """Start reading at ``block``, forward or back, forgetting the tail hashes. Only for a
        caller that knows no event it needs lies before ``block`` (e.g. the block a round opened in)."""
        self.next_block = max(0, block)
        self.hashes = {n: h for n, h in self.hashes.items() if n < self.next_block}

    def state(self) -> dict[str, Any]:
        """The saved form: position, tail hashes, the caller's ``extra``."""
        return {"format": _FORMAT, "next_block": self.next_block, "start_block": self.start_block,
                "hashes": {str(n): h for n, h in sorted(self.hashes.items())}, "extra": self.extra}

    def save(self) -> None:
        """Write `state` to ``path`` atomically and durably (nothing without a path)."""
        if self.path is not None:
            atomic_write_bytes(self.path, json.dumps(self.state(), sort_keys=True).encode())

    def _load(self) -> None:
        try:
            doc = json.loads(self.path.read_text())
            if doc.get("format") != _FORMAT or int(doc["start_block"]) != self.start_block:
                raise ValueError("written for another scan")
            self.next_block = int(doc["next_block"])
            self.hashes = {int(n): str(h) for n, h in doc.get("hashes", {}).items()}
            self.extra = dict(doc.get("extra") or {})
        except FileNotFoundError:
            return
        except (ValueError, KeyError, TypeError, AttributeError, OSError) as exc:
            # reading again from the start is always safe (handlers are idempotent)
            log.warning("event cursor %s is unusable (%s): reading again from block %d", self.path, exc,
                        self.start_block)
            self.next_block, self.hashes, self.extra = self.start_block, {}, {}

    # -- reading ----------------------------------------------------------------------------

    def poll(self) -> CursorBatch:
        """Read every new event up to the head minus ``confirmations`` that this node can prove it
        has; see the module docstring.

        Raises:
            RpcUnavailable: the RPC endpoint does not answer (the position is unchanged).
        """
        batch = CursorBatch()
        head = self.client.block_number()
        target = head - self.confirmations
        self._check_continuity(batch)
        if batch.stale:
            self.stale_polls += 1
            return batch
        deep_end = min(target, head - self.tail_blocks)
        if self.next_block <= deep_end:  # old blocks: ranged reads, any node lagging < tail_blocks has them
            end_header = self.client.block_header(deep_end)
            if end_header is None:
                batch.stale = True
                self.stale_polls += 1
                return batch
            batch.events += self.client.get_logs(self.next_block, deep_end, self.event_names,
                                                 contract=self.contract, task_id=self.task_id,
                                                 max_range=self.max_range)
            self.hashes[deep_end] = end_header["hash"]
            self.next_block = deep_end + 1
        for _ in range(4 * self.tail_blocks + 8):  # bounded: each pass reads a block or rewinds
            if self.next_block > target:
                break
            n = self.next_block
            header = self.client.block_header(n)
            if header is None:  # the head promised it, this node lacks it: read it later
                batch.stale = True
                break
            prev = self.hashes.get(n - 1)
            if prev is not None and header["parent_hash"] != prev:
                self._reorg(n - 1, batch)
                continue
            logs = self._logs_of(header)
            if logs is None:  # the node no longer (or not yet) knows this hash
                batch.stale = True
                break
            batch.events += logs
            self.hashes[n] = header["hash"]
            self.next_block = n + 1
        if batch.stale:
            self.stale_polls += 1
        keep_from = self.next_block - self.tail_blocks
        self.hashes = {b: h for b, h in self.hashes.items() if b >= keep_from}
        return batch

    def _logs_of(self, header: dict[str, Any]) -> list[dict[str, Any]] | None:
        bloom = BloomFilter(header["bloom"])
        if not all(item in bloom for item in self._bloom_items):
            return []  # the bloom filter proves there is no log of this contract / task in the block
        return self.client.get_logs_at(header["hash"], self.event_names, contract=self.contract,
                                       task_id=self.task_id)

    def _check_continuity(self, batch: CursorBatch) -> None:
        """Compare the hash of the last block read with the chain's; rewind on a reorg; mark the
        batch stale when the node does not have that block (it lags, or a reorg shortened the
        chain: either way there is nothing newer to read from it yet)."""
        last = self.next_block - 1
        if last not in self.hashes:
            return
        header = self.client.block_header(last)
        if header is None:
            batch.stale = True
        elif header["hash"] != self.hashes[last]:
            self._reorg(last, batch)

    def _reorg(self, changed: int, batch: CursorBatch) -> None:
        """Block ``changed`` is not the one read: walk back to the newest block read whose hash the
        chain still has and rewind to the block after it."""
        fork = None
        for n in sorted((b for b in self.hashes if b < changed), reverse=True):
            header = self.client.block_header(n)
            if header is not None and header["hash"] == self.hashes[n]:
                fork = n + 1
                break
        if fork is None:  # deeper than the tail: read the whole tail again
            fork = min(self.hashes) if self.hashes else self.start_block
            log.error("a reorg replaced every block of the last %d read (from %d): reading again from block %d; "
                      "raise tail_blocks if this chain reorganizes this deep", len(self.hashes), fork, fork)
        else:
            log.warning("reorg: blocks from %d on changed; reading again from there", fork)
        self.reorgs += 1
        self.rewind(fork)
        batch.events = [e for e in batch.events if e["block_number"] < fork]
        batch.reorg_from = fork if batch.reorg_from is None else min(batch.reorg_from, fork)


class EventWatcher:
    """Poll an `EventCursor`, dispatch each event once to the handlers registered per name, in
    chain order, with an on-disk checkpoint (see the module docstring).

    Args:
        client: a `tenzro_operator.chain.ChainClient`.
        event_names: events to fetch (None = every event of the contract).
        checkpoint_path: JSON file of the progress (the cursor's file).
        contract: deployment name of the contract (default the registry).
        task_id: only events whose first indexed argument is this bytes32 task id.
        start_block: first block when there is no checkpoint (default: the deployment's block).
        max_range: blocks per ranged ``eth_getLogs`` request.
        confirmations: stay this many blocks behind the head (0 on a devnet).
        tail_blocks: see `EventCursor`.
        max_consecutive_failures: handler failures in a row before `EventWatcherHalted`.
        max_rpc_downtime_s: how long `run` tolerates the RPC being down (seconds).
        metrics: a `tenzro_operator.metrics.RoleMetrics` (``handler_errors``), optional.
    """

    def __init__(self, client, event_names: Sequence[str] | None, checkpoint_path: str | Path, *,
                 contract: str = "TrainingRegistry", task_id: bytes | None = None, start_block: int | None = None,
                 max_range: int = 2000, confirmations: int = 0, tail_blocks: int = 64,
                 max_consecutive_failures: int = 5, max_rpc_downtime_s: float = 120.0, metrics: Any = None) -> None:
        self.client = client
        self.event_names = list(event_names) if event_names else None
        self.contract = contract
        self.cursor = EventCursor(client, event_names, contract=contract, task_id=task_id,
                                  start_block=client.deployment.deploy_block if start_block is None else start_block,
                                  confirmations=confirmations, tail_blocks=tail_blocks, max_range=max_range,
                                  path=checkpoint_path)
        self.max_consecutive_failures = max(1, max_consecutive_failures)
        self.max_rpc_downtime_s = max_rpc_downtime_s
        self.metrics = metrics
        self.handlers: dict[str, list[Handler]] = {}
        self.errors = self.consecutive_failures = self.handled = 0

    @property
    def last_block(self) -> int:
        """The last block whose events were all handled."""
        return self.cursor.next_block - 1

    def on(self, event_name: str, handler: Handler) -> "EventWatcher":
        """Register ``handler`` for ``event_name`` (``"*"`` = every event). Returns self."""
        if event_name != "*":
            self.client.event_topic(event_name, self.contract)
            if self.event_names is not None and event_name not in self.event_names:
                raise ValueError(f"{event_name} is not among the watched events {self.event_names}")
        self.handlers.setdefault(event_name, []).append(handler)
        return self

    def poll_once(self) -> int:
        """Dispatch every new event the cursor reads. Returns the number handled. Stops early at a
        failing handler: the cursor is rewound to that event's block and the events of that block
        handled already are remembered in the checkpoint, so the next call (or a restarted
        watcher) resumes at the failed event and handles nothing twice.

        Raises:
            RpcUnavailable: the endpoint does not answer (after the client's retries).
            EventWatcherHalted: ``max_consecutive_failures`` handler failures in a row.
        """
        cur = self.cursor
        batch = cur.poll()
        done = {(str(t), int(i)) for t, i in cur.extra.get("done", [])}
        done_block = cur.extra.get("done_block")
        if batch.reorg_from is not None and done_block is not None and done_block >= batch.reorg_from:
            done, done_block = set(), None
        handled = 0
        for ev in batch.events:
            key = (ev["tx_hash"], ev["log_index"])
            if ev["block_number"] == done_block and key in done:
                continue
            if not self._dispatch(ev):
                cur.rewind(ev["block_number"])
                if done_block != ev["block_number"]:
                    done, done_block = set(), ev["block_number"]
                cur.extra = {"done": sorted(done), "done_block": done_block}
                cur.save()
                return handled
            if done_block != ev["block_number"]:
                done, done_block = set(), ev["block_number"]
            done.add(key)
            handled += 1
            self.handled += 1
            # the position as if the read stopped after this event: a crash resumes right after it
            next_block = cur.next_block
            cur.next_block = ev["block_number"]
            cur.extra = {"done": sorted(done), "done_block": done_block}
            cur.save()
            cur.next_block = next_block
        cur.extra = {}
        cur.save()
        return handled

    def _dispatch(self, ev: dict[str, Any]) -> bool:
        handlers = self.handlers.get(ev["event"], []) + self.handlers.get("*", [])
        for h in handlers:
            try:
                h(ev)
            except Exception as exc:  # noqa: BLE001 - isolation: log, count, retry later
                self.errors += 1
                self.consecutive_failures += 1
                if self.metrics is not None:
                    self.metrics.handler_errors.labels(event=ev["event"]).inc()
                log.error("handler %s failed on %s (block %d, tx %s, log %d): %s: %s [failure %d/%d in a row]",
                          getattr(h, "__qualname__", h), ev["event"], ev["block_number"], ev["tx_hash"],
                          ev["log_index"], type(exc).__name__, exc, self.consecutive_failures,
                          self.max_consecutive_failures, exc_info=log.isEnabledFor(logging.DEBUG))
                if self.consecutive_failures >= self.max_consecutive_failures:
                    raise EventWatcherHalted(
                        f"event handlers failed {self.consecutive_failures} times in a row; last on "
                        f"{ev['event']} at block {ev['block_number']} (tx {ev['tx_hash']}): "
                        f"{type(exc).__name__}: {exc}") from exc
                return False
        self.consecutive_failures = 0
        return True

    def run(self, stop: threading.Event | None = None, poll_interval_s: float = 1.0,
            until: Callable[[], bool] | None = None) -> None:
        """Poll until ``stop`` is set or ``until()`` is true; ride out RPC outages up to
        ``max_rpc_downtime_s`` (then re-raise `RpcUnavailable`)."""
        stop = stop or threading.Event()
        down_since: float | None = None
        delay = poll_interval_s
        while not stop.is_set() and not (until and until()):
            try:
                self.poll_once()
                if down_since is not None:
                    log.info("RPC %s is back after %.1f s; resuming from block %d", self.client.shown_url,
                             time.monotonic() - down_since, self.cursor.next_block)
                down_since, delay = None, poll_interval_s
            except RpcUnavailable:
                now = time.monotonic()
                down_since = down_since or now
                if now - down_since > self.max_rpc_downtime_s:
                    raise
                log.warning("RPC %s unavailable; watcher paused at block %d, retrying in %.1f s",
                            self.client.shown_url, self.cursor.next_block, delay)
                delay = min(delay * 2, 10.0)
            if until and until():
                break
            stop.wait(delay)
