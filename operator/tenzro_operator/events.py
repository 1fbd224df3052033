"""Event watching that survives restarts: ``eth_getLogs`` in bounded block ranges from the last
processed block kept on disk.

`EventWatcher` polls the registry's logs (optionally only some events, only one task), decodes
them with the ABI and calls the handlers registered per event name, in chain order. Progress is
checkpointed to a JSON file (written atomically: temp file + rename) after every handled event,
so a watcher (or its daemon) restarted at any point resumes where it left off, and every event is
handled once: events are deduplicated on ``(tx hash, log index)``.

Failures:

* the RPC endpoint down (`RpcUnavailable` after the client's own retries): `run` logs, waits with
  backoff and polls again, up to ``max_rpc_downtime_s`` seconds, then re-raises;
* a handler raising: logged with the event's context, counted (``handler_errors`` metric and
  ``watcher.errors``), and the same event is retried on the next poll (nothing after it is
  handled first, so ordering holds); ``max_consecutive_failures`` failures in a row raise
  `EventWatcherHalted` on purpose.

An event passed to a handler is a dict ``{"event", "args", "block_number", "tx_hash", "log_index"}``
(args decoded by name; bytes32 as ``bytes``; addresses checksummed).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from tenzro_operator.errors import EventWatcherHalted, RpcUnavailable

__all__ = ["EventWatcher", "Handler"]

log = logging.getLogger("tenzro.events")

Handler = Callable[[dict[str, Any]], None]


class EventWatcher:
    """Poll, decode and dispatch contract events with an on-disk checkpoint.

    Args:
        client: a `tenzro_operator.chain.ChainClient`.
        event_names: events to fetch (None = every event of the contract).
        checkpoint_path: JSON file of the progress (created on first save).
        contract: deployment name of the contract (default the registry).
        task_id: only events whose first indexed argument is this bytes32 task id.
        start_block: first block when there is no checkpoint (default: the deployment's block).
        max_range: blocks per ``eth_getLogs`` request (bounded ranges).
        confirmations: stay this many blocks behind the head (0 on a devnet).
        max_consecutive_failures: handler failures in a row before `EventWatcherHalted`.
        max_rpc_downtime_s: how long `run` tolerates the RPC being down (seconds).
        metrics: a `tenzro_operator.metrics.RoleMetrics` (``handler_errors``), optional.
    """

    def __init__(self, client, event_names: Sequence[str] | None, checkpoint_path: str | Path, *,
                 contract: str = "TrainingRegistry", task_id: bytes | None = None, start_block: int | None = None,
                 max_range: int = 2000, confirmations: int = 0, max_consecutive_failures: int = 5,
                 max_rpc_downtime_s: float = 120.0, metrics: Any = None) -> None:
        self.client = client
        self.event_names = list(event_names) if event_names else None
        self.checkpoint_path = Path(checkpoint_path)
        self.contract, self.task_id = contract, task_id
        self.max_range = max(1, max_range)
        self.confirmations = max(0, confirmations)
        self.max_consecutive_failures = max(1, max_consecutive_failures)
        self.max_rpc_downtime_s = max_rpc_downtime_s
        self.metrics = metrics
        self.handlers: dict[str, list[Handler]] = {}
        self.errors = 0
        self.consecutive_failures = 0
        self.handled = 0
        default_start = client.deployment.deploy_block if start_block is None else start_block
        self.last_block, self._seen = self._load(default_start - 1)
        for name in self.event_names or []:
            client.event_topic(name, contract)  # fail fast on a misspelt event name

    # -- handlers ---------------------------------------------------------------------------

    def on(self, event_name: str, handler: Handler) -> "EventWatcher":
        """Register ``handler`` for ``event_name`` (``"*"`` = every event). Returns self."""
        if event_name != "*":
            self.client.event_topic(event_name, self.contract)
            if self.event_names is not None and event_name not in self.event_names:
                raise ValueError(f"{event_name} is not among the watched events {self.event_names}")
        self.handlers.setdefault(event_name, []).append(handler)
        return self

    # -- checkpoint -------------------------------------------------------------------------

    def _load(self, default_last: int) -> tuple[int, set[tuple[str, int]]]:
        try:
            doc = json.loads(self.checkpoint_path.read_text())
            return int(doc["last_block"]), {(str(t), int(i)) for _b, t, i in doc.get("seen", [])}
        except FileNotFoundError:
            return default_last, set()
        except (ValueError, KeyError, TypeError) as exc:
            raise EventWatcherHalted(f"event checkpoint {self.checkpoint_path} is corrupt ({exc}); "
                                     "move it away to rescan from the deployment block") from None

    def _save(self, seen_in_progress: list[tuple[int, str, int]]) -> None:
        self.checkpoint_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.checkpoint_path.with_name(self.checkpoint_path.name + f".tmp{os.getpid()}")
        tmp.write_text(json.dumps({"last_block": self.last_block, "seen": [list(s) for s in seen_in_progress]}))
        os.replace(tmp, self.checkpoint_path)

    # -- polling ----------------------------------------------------------------------------

    def poll_once(self) -> int:
        """Fetch and dispatch every new event up to the head (minus confirmations).

        Returns the number of events handled. Raises `RpcUnavailable` (after the client's
        retries) and `EventWatcherHalted`; stops early (returns) at a failing handler, which
        the next call retries.
        """
        head = self.client.block_number() - self.confirmations
        handled = 0
        while self.last_block < head:
            start = self.last_block + 1
            end = min(head, start + self.max_range - 1)
            events = self.client.get_logs(start, end, self.event_names, contract=self.contract, task_id=self.task_id)
            progress: list[tuple[int, str, int]] = [(0, t, i) for t, i in self._seen]
            for ev in events:
                key = (ev["tx_hash"], ev["log_index"])
                if key in self._seen:
                    continue
                if not self._dispatch(ev):
                    self._save(progress)
                    return handled
                self._seen.add(key)
                progress.append((ev["block_number"], *key))
                handled += 1
                self.handled += 1
                self._save(progress)
            self.last_block = end
            self._seen = set()
            self._save([])
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
                    log.info("RPC %s is back after %.1f s; resuming from block %d", self.client.rpc_url,
                             time.monotonic() - down_since, self.last_block + 1)
                down_since, delay = None, poll_interval_s
            except RpcUnavailable:
                now = time.monotonic()
                down_since = down_since or now
                if now - down_since > self.max_rpc_downtime_s:
                    raise
                log.warning("RPC %s unavailable; watcher paused at block %d, retrying in %.1f s",
                            self.client.rpc_url, self.last_block, delay)
                delay = min(delay * 2, 10.0)
            if until and until():
                break
            stop.wait(delay)
