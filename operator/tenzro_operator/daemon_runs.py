"""Which runs a daemon serves: one configured task or every live run it can take part in, one
after another, riding out outages, quarantining a run that keeps failing (kept across restarts).
A part of `Daemon`."""

from __future__ import annotations

import json
import logging
import time
from typing import Callable

from tenzro_operator.chain import RunStatus, RunView
from tenzro_operator.chain.event_cursor import atomic_write_bytes
from tenzro_operator.errors import (
    ChainRevert,
    DaemonHalted,
    ServiceUnavailable,
    StopRequested,
    TenzroError,
    TxFailed,
)
from tenzro_operator.spec import task_id_bytes32

log = logging.getLogger("tenzro.daemon")


class RunSelection:
    """Which runs a daemon serves, and how it waits for one (a part of `Daemon`)."""

    def serve_runs(self) -> int:
        """Serve runs one after another and return how many were served: the config's ``task_id``
        once; else discovered runs until ``max_runs`` are done (None: until a stop is requested).
        Only the first discovery is bounded by ``discover_timeout_s``; between runs a daemon
        waits for the next run as long as it takes. Each role's `reset_run` clears the previous
        run's state before the next is opened.

        A discovered run whose serving fails is given up (`quarantine`) and does not count.

        Raises:
            TenzroError: no run to serve within ``discover_timeout_s`` at start-up; what
                `serve` raises for the configured ``task_id``. ServiceUnavailable: the RPC
                endpoint or IPFS node is down. StopRequested: a stop was requested.
        """
        if self.config.task_id:
            return int(self.serve_riding_outages(self.find_task()))
        limit = getattr(self.config, "max_runs", 1)
        served = tried = 0
        while limit is None or served < limit:
            self.check_stop()
            if tried:
                self.reset_run()
            tried += 1
            tid = self.find_task(patient=served > 0)
            try:
                ok = self.serve_riding_outages(tid)
            except Exception as exc:  # noqa: BLE001 - filtered by quarantine
                self.quarantine(tid, exc)
                ok = False
            if ok:
                served += 1
            else:
                self.sleep(max(self.poll_s, 1.0))  # left to others or retried: do not spin on the same run
        return served

    def serve_riding_outages(self, task_id: bytes) -> bool:
        """`serve` run ``task_id``; when the RPC endpoint or IPFS node stops answering outside a
        guarded step (reading the run, getting elected, restoring state: every read already
        retried by its client), forget the run's in-memory state (`reset_run`) and serve it again
        from the chain and this daemon's state files, as a restarted process would, for up to
        ``outage_tolerance_s`` seconds from the first failure (`_ride_out`).

        Raises:
            ServiceUnavailable: the service is still down after ``outage_tolerance_s``.
            StopRequested: a stop was requested meanwhile. What `serve` raises otherwise.
        """
        while True:
            try:
                return self.serve(task_id)
            except ServiceUnavailable as exc:
                if not self._ride_out(f"serving run 0x{task_id.hex()[:16]}", exc):
                    raise
            self.sleep(self.backoff_s())
            self.reset_run()

    def quarantine(self, task_id: bytes, exc: Exception) -> None:
        """Give up on a discovered run after an error of its own (a spec that does not match its
        hash, unusable weights, `DaemonHalted` in its steps, ...): log it and never pick it again
        in this process (`bad_runs`), so that one bad run posted by anyone cannot stop a daemon
        that serves others.

        Raises:
            ``exc`` itself when it is `StopRequested`, or `ServiceUnavailable` (also as the cause
            of `DaemonHalted`): the RPC endpoint or IPFS node, not the run, is the problem.
        """
        cause = exc.__cause__ if isinstance(exc, DaemonHalted) else exc
        if isinstance(exc, StopRequested) or isinstance(cause, ServiceUnavailable):
            raise exc
        if isinstance(cause, TxFailed) and not isinstance(cause, ChainRevert):
            log.warning("%s: run 0x%s: a transaction's outcome is unknown (%s); the run is read again, not given up",
                        self.role, task_id.hex()[:16], cause)
            return
        if self.holds_stake(task_id):
            log.error("%s: run 0x%s failed (%s: %s) but this account holds stake in it or is its syncer: not giving "
                      "up; the chain is read again and the run retried", self.role, task_id.hex()[:16],
                      type(exc).__name__, exc, exc_info=not isinstance(exc, TenzroError))
            return
        self.bad_runs.add(task_id)
        self._save_skipped()
        log.error("%s: giving up on run 0x%s: %s: %s", self.role, task_id.hex()[:16], type(exc).__name__, exc,
                  exc_info=not isinstance(exc, TenzroError))

    def holds_stake(self, task_id: bytes) -> bool:
        """True when leaving run ``task_id`` would cost this account: it is the run's syncer, or an
        enrolled trainer of a run that is not over (M1 of issue 14: such a run is
        retried, never given up).

        Raises:
            ServiceUnavailable: the RPC endpoint does not answer.
        """
        try:
            run = self.chain.get_run(task_id)
        except ChainRevert:  # Registry__UnknownTask
            return False
        if run.status in (RunStatus.SEALED, RunStatus.CANCELLED, RunStatus.NONE):
            return False
        if run.syncer == self.account.address:
            return True
        stats = self.chain.trainer_stats(task_id, self.account.address)
        return bool(stats.enrolled)

    def _load_skipped(self) -> set[bytes]:
        """Runs given up on by an earlier life of this daemon (``<data_dir>/<role>-skipped-runs.json``)."""
        try:
            ids = json.loads(self.skip_path.read_text())
            return {bytes.fromhex(str(t).removeprefix("0x")) for t in ids}
        except FileNotFoundError:
            return set()
        except (ValueError, TypeError, OSError) as exc:
            log.warning("%s: ignoring unreadable %s: %s", self.role, self.skip_path, exc)
            return set()

    def _save_skipped(self) -> None:
        atomic_write_bytes(self.skip_path, json.dumps(sorted("0x" + t.hex() for t in self.bad_runs)).encode())

    def live_runs(self) -> list[tuple[bytes, RunView]]:
        """``(task id, RunView)`` of every run that is not over, in posting order, without
        `bad_runs`. Discovery polls this every second, so only new task ids are listed and
        Sealed / Cancelled runs (terminal) are remembered, never read again: the calls per poll
        grow with the live runs, not with every run ever posted."""
        self._run_ids += self.chain.all_runs(start=len(self._run_ids))
        allow = getattr(self.config, "allow_sponsors", None)
        min_pool = getattr(self.config, "min_reward_pool_atto", 0)
        live = []
        for tid in self._run_ids:
            if tid in self._over or tid in self.bad_runs:
                continue
            run = self.chain.get_run(tid)
            if run.status in (RunStatus.SEALED, RunStatus.CANCELLED):
                self._over.add(tid)
            elif (allow is not None and run.sponsor not in allow) or run.reward_pool < min_pool:
                if run.syncer == self.account.address:  # elected anyway: serve it
                    live.append((tid, run))
                else:
                    self._over.add(tid)  # the sponsor and the pool of a run never change
            else:
                live.append((tid, run))
        return live

    def find_task(self, patient: bool = False) -> bytes:
        """The next run to serve (each role; ``patient``: wait without a time limit)."""
        raise NotImplementedError(f"{type(self).__name__}.find_task")

    def wait_for_task(self, discover: Callable[[], bytes | None], missing: str, patient: bool = False) -> bytes:
        """The run to serve (bytes32 task id): the config's ``task_id`` once it is posted, else the
        first id ``discover()`` returns (None = nothing yet); polls every ``poll_s`` seconds.
        ``patient``: no time limit.

        Raises:
            TenzroError: ``"<role>: no <missing> after <discover_timeout_s> s"`` (config key,
                default 600 s).
            StopRequested: a stop was requested while waiting.
        """
        timeout_s = float("inf") if patient else float(getattr(self.config, "discover_timeout_s", 600.0))
        deadline = time.monotonic() + timeout_s
        want = task_id_bytes32(self.config.task_id) if self.config.task_id else None
        while True:
            if want is not None:
                if self.chain.run_exists(want):
                    return want
            else:
                found = discover()
                if found is not None:
                    return found
            if time.monotonic() > deadline:
                raise TenzroError(f"{self.role}: no {missing} after {timeout_s:.0f} s")
            self.sleep(self.poll_s)
