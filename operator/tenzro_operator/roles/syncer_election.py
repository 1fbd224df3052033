"""Which runs a syncer serves and how it gets them: the runs it is (or may become) the syncer of,
one thread per run when it serves every run it is elected for, and the two-step election
(contracts/PROTOCOL.md §4; `ChainClient.run_syncer_election`).

Part of `tenzro_operator.roles.syncer.SyncerDaemon`; imports nothing of the other roles, nor the
syncer's module (a worker is built as ``type(self)``).
"""

from __future__ import annotations

import logging
import threading
import time

from tenzro_operator.chain import ZERO_ADDRESS, RunStatus, RunView
from tenzro_operator.errors import ChainRevert, StopRequested, TenzroError
from tenzro_operator.logs import log_context


log = logging.getLogger("tenzro.syncer")


class SyncerElection:
    """The syncer's runs and elections (see the module docstring)."""

    def _candidates(self) -> list[bytes]:
        """Unsealed runs this account should serve: its syncer is this account or unset, or the
        syncer is replaceable (missed a round deadline by the timeout), in posting order."""
        out, now = [], None
        for tid, run in self.live_runs():
            if run.syncer in (ZERO_ADDRESS, self.account.address):
                out.append(tid)
            elif run.status == RunStatus.TRAINING and run.syncer_replaceable_at:
                now = self.chain_now() if now is None else now
                if now > run.syncer_replaceable_at:
                    out.append(tid)
        return out

    def serve_elected(self) -> None:
        """Serve every run of `_candidates` at once, one thread per run, until ``max_runs`` runs
        are over (None: until stopped). Concurrent, not in turn: the registry may elect this
        account for a second run while it serves a first, and a round deadline missed there
        makes it replaceable and slashable.

        Each run gets a `SyncerDaemon` of its own (spec, outer optimizers, state file
        ``syncer-<task>.pt``) sharing this one's chain client (one nonce counter, thread-safe),
        IPFS client, metrics and stop event. A run left to another syncer does not count; it
        is served again if that syncer becomes replaceable.

        A run whose thread fails on its own (bad spec, unusable weights, `DaemonHalted`) is given
        up (`Daemon.quarantine`) and the others go on.

        Raises:
            TenzroError: no run within ``discover_timeout_s`` at start-up.
            ServiceUnavailable: the RPC endpoint or IPFS node is down (every run's thread is
                stopped first, its state saved). StopRequested: a stop was requested.
        """
        limit = getattr(self.config, "max_runs", 1)
        timeout_s = float(getattr(self.config, "discover_timeout_s", 600.0))
        deadline = time.monotonic() + timeout_s
        workers: dict[bytes, threading.Thread] = {}
        outcome: dict[bytes, bool | Exception] = {}
        over: set[bytes] = set()
        try:
            while True:
                for tid in [t for t, th in workers.items() if not th.is_alive()]:
                    del workers[tid]
                    res = outcome.pop(tid, None)
                    if isinstance(res, StopRequested):
                        continue
                    if isinstance(res, Exception):
                        self.quarantine(tid, res)  # raises when the RPC or IPFS node is down
                    elif res:
                        over.add(tid)
                if limit is not None and len(over) >= limit and not workers:
                    return
                self.check_stop()
                if limit is None or len(over) + len(workers) < limit:
                    # a failed poll (RPC hiccup) is counted and retried after a backoff, never fatal to the
                    # runs in flight; max_consecutive_failures in a row halt on purpose (`guarded`)
                    candidates = self.guarded("discovery poll", self._candidates)
                    if candidates is None:
                        self.sleep(self.backoff_s())
                        continue
                    for tid in candidates:
                        if tid in workers or tid in over:
                            continue
                        workers[tid] = self._start_worker(tid, outcome)
                        if limit is not None and len(over) + len(workers) >= limit:
                            break
                if not workers and not over and time.monotonic() > deadline:
                    raise TenzroError(f"syncer: no run to serve after {timeout_s:.0f} s")
                self.sleep(self.poll_s)
        finally:
            if workers:
                self.request_stop()
                for th in workers.values():
                    th.join()

    def _start_worker(self, tid: bytes, outcome: dict) -> threading.Thread:
        cfg = self.config.model_copy(update={"task_id": "0x" + tid.hex()})
        worker = type(self)(cfg, self.account, self.chain, self.ipfs, metrics=self.metrics, stop=self.stop,
                            leave_to_others=True)
        worker.history = self.history  # one record list (list.append is atomic)
        worker.summary = self.summary  # one tally (`_tally` updates it under a lock)

        def target() -> None:
            with log_context(role="syncer"):
                try:
                    outcome[tid] = worker.serve_riding_outages(tid)
                except Exception as exc:  # noqa: BLE001 - handed to serve_elected
                    outcome[tid] = exc

        th = threading.Thread(target=target, name=f"syncer-{tid.hex()[:8]}", daemon=True)
        log.info("serving run 0x%s in thread %s", tid.hex()[:16], th.name)
        th.start()
        return th

    def ensure_elected(self, run: RunView) -> bool:
        """For a Training run without a syncer, or whose syncer became replaceable
        (``syncerReplaceableAt`` passed): run the two-step election (anyone may). True iff this
        account is the run's syncer afterwards."""
        me = self.account.address
        if run.syncer == me:
            return True
        if run.status != RunStatus.TRAINING:
            return False  # no election while Enrolling (nor after the last round)
        replaceable = run.syncer != ZERO_ADDRESS and run.syncer_replaceable_at and \
            self.chain_now() > run.syncer_replaceable_at
        if run.syncer != ZERO_ADDRESS and not replaceable:
            return False
        info = self.chain.syncer_info()
        if info.free < run.syncer_bond:
            log.warning("this account cannot be drawn for this run: unlocked stake %d atto < the run's bond %d "
                        "(register more stake); running the election for the others", info.free, run.syncer_bond)
        if replaceable:
            self.nudge_devnet(run.syncer_replaceable_at)
        try:
            elected = self.chain.run_syncer_election(self.task_id)
        except ChainRevert as exc:  # refused at estimate or reverted when mined (a lost race): ask the chain
            elected = self.chain.get_run(self.task_id).syncer
            log.info("syncer election refused (%s); the run's syncer is now %s%s", exc, elected,
                     " (this account)" if elected == me else "")
            return elected == me
        log.info("syncer election chose %s%s%s", elected, " (this account)" if elected == me else "",
                 f", replacing {run.syncer} (its bond burned)" if replaceable else "")
        return elected == me
