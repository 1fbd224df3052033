"""Lifecycle shared by the long-running roles (trainer, syncer): start-up checks, stop on
SIGTERM/SIGINT, handler isolation with a bounded run of consecutive failures, atomic files.

The pattern is the chain-keeper one (pymaker / auction-keeper): check everything the daemon needs
before doing any work and fail fast with a message that names the service; then run a loop of
small idempotent steps, each isolated: an exception is logged with its context and counted, and
``max_consecutive_failures`` failures in a row halt the daemon on purpose (`DaemonHalted`).

Usage::

    class MyDaemon(Daemon):
        role = "trainer"
        def prepare(self, run): ...       # spec, runtime, ... of the run
        def step(self) -> str | None:     # one idempotent unit of work; "done" = run over
            ...
        def find_task(self, patient=False) -> bytes:
            return self.wait_for_task(self._discover, "run to join", patient)
        def serve(self, task_id) -> bool:
            self.open_task(task_id)
            self.step_until_done("trainer round")
            return True
        def reset_run(self): ...          # forget the previous run before the next
        def run(self) -> int:
            self.startup_checks()
            self.serve_runs()             # task_id once, else up to max_runs discovered runs
            return 0
    d = MyDaemon(cfg, account, chain, ipfs)
    d.install_signal_handlers()           # main thread only
    exit_code = d.run()
"""

from __future__ import annotations

import io
import json
import logging
import signal
import threading
import time
from pathlib import Path
from typing import Any, Callable

import torch

from tenzro_operator.chain import RunStatus, RunView
from tenzro_operator.chain.event_cursor import atomic_write_bytes  # re-exported: the one durable write
from tenzro_operator.daemon_peers import PeerKeeping
from tenzro_operator.daemon_runs import RunSelection
from tenzro_operator.errors import (
    DaemonHalted,
    IpfsError,
    IpfsIsolated,
    ServiceUnavailable,
    StopRequested,
    TenzroError,
)
from tenzro_operator.logs import set_log_context
from tenzro_operator.redact import redact_url

__all__ = ["Daemon", "DaemonHalted", "StopRequested", "append_jsonl", "atomic_write_bytes", "atomic_torch_save",
           "load_state_file"]

log = logging.getLogger("tenzro.daemon")


# ----------------------------------------------------------------------------- atomic files


def atomic_torch_save(obj: Any, path: str | Path) -> None:
    """``torch.save`` to ``path`` atomically (serialized in memory, then `atomic_write_bytes`)."""
    buf = io.BytesIO()
    torch.save(obj, buf)
    atomic_write_bytes(path, buf.getvalue())


def load_state_file(path: str | Path) -> dict[str, Any]:
    """A state file written with `atomic_torch_save`, loaded with ``weights_only=True`` (tensors,
    numbers, strings, lists and dicts only: a tampered file can not run code).

    Raises:
        TenzroError: the file is unreadable or holds anything else (path and cause named).
    """
    try:
        obj = torch.load(path, weights_only=True)
    except Exception as exc:  # noqa: BLE001 - pickle / zip / OS errors of a corrupt or foreign file
        raise TenzroError(f"state file {path} can not be loaded safely ({type(exc).__name__}: {exc}); "
                          "move it away to start over from the chain") from exc
    if not isinstance(obj, dict):
        raise TenzroError(f"state file {path} holds a {type(obj).__name__}, not a state dict")
    return obj


def append_jsonl(path: str | Path, record: dict[str, Any]) -> None:
    """Append one JSON line (a single ``write`` of a complete line, flushed)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with open(p, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record, sort_keys=True) + "\n")
        fh.flush()


# ----------------------------------------------------------------------------- the base


class Daemon(RunSelection, PeerKeeping):
    """Base of `TrainerDaemon` and `SyncerDaemon`.

    Args:
        config: the role's config (`tenzro_operator.config.CommonConfig` subclass).
        account: the signing account (already unlocked).
        chain: a `ChainClient` signing as ``account``.
        ipfs: an `IpfsClient`.
        metrics: the role's metrics object (optional).
        stop: an event that stops the daemon when set (default: a new one).
        max_consecutive_failures: failed steps in a row before `DaemonHalted`.
    """

    role = "operator"
    dials_trainers = True  # `track_peers`: connect to every enrolled trainer's node (a trainer: False)
    announces_node = True  # `track_peers`: others fetch from this party's node (a watcher: False)

    def __init__(self, config, account, chain, ipfs, *, metrics: Any = None, stop: threading.Event | None = None,
                 max_consecutive_failures: int = 5) -> None:
        self.config, self.account, self.chain, self.ipfs = config, account, chain, ipfs
        self.metrics = metrics
        self.stop = stop or threading.Event()
        self.max_consecutive_failures = max(1, max_consecutive_failures)
        self.consecutive_failures = 0
        self.failures = 0
        self.outage_tolerance_s = float(getattr(config, "outage_tolerance_s", 300.0))
        self._outage_since: float | None = None  # monotonic time the RPC / IPFS node stopped answering
        self.metrics_port: int | None = None
        self.poll_s = min(float(config.poll_interval_s), 1.0)  # seconds between chain polls
        self.task_id: bytes | None = None
        self.data_dir = Path(config.data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.skip_path = self.data_dir / f"{self.role}-skipped-runs.json"
        self.bad_runs: set[bytes] = self._load_skipped()  # runs given up on (`quarantine`), kept across restarts
        self._run_ids: list[bytes] = []  # every task id posted so far (append-only on chain)
        self._over: set[bytes] = set()  # runs seen Sealed or Cancelled (terminal)
        self.ipfs_peers = None  # BootstrapPeers keeping the config's ipfs_bootstrap peers connected
        self.peer_books: dict[bytes, Any] = {}  # task id -> its PeerBook (`track_peers`)

    # -- start-up -------------------------------------------------------------------------

    def startup_checks(self) -> None:
        """Fail fast: the RPC answers and the deployment has code at every address
        (`ChainClient.check_deployment`), the signer is this account (a daemon without an account,
        e.g. the watcher, reads only), the IPFS node answers.
        Starts the metrics server when the config has a port (0 = any free port; None = off).

        Raises:
            RpcUnavailable / DeploymentError / IpfsUnavailable / TenzroError: with the service named.
        """
        self.chain.check_deployment()
        if self.account is not None and (self.chain.account is None or self.chain.address != self.account.address):
            raise TenzroError(f"{self.role}: the chain client must sign as {self.account.address}")
        try:
            self.ipfs.version()
        except ServiceUnavailable:
            raise
        except IpfsError as exc:
            raise TenzroError(f"{self.role}: the IPFS node at {self.ipfs.api_url} does not work: {exc}") from None
        log.info("%s: chain %s (chain id %d, %s), IPFS node %s", self.role, self.chain.shown_url,
                 self.chain.chain_id, self.chain.deployment.path, redact_url(self.ipfs.api_url))
        self.keep_ipfs_peers()
        for var, field in getattr(self.config, "_env_overrides", []):
            log.warning("%s: %s from the environment overrides the config file's %s", self.role, var, field)
        port = getattr(self.config, "metrics_port", None)
        if port is not None and self.metrics is not None:
            from tenzro_operator.metrics import start_metrics_server

            self.metrics_port = start_metrics_server(port, self.metrics)
            log.info("%s metrics on http://127.0.0.1:%d/metrics", self.role, self.metrics_port)

    # -- stopping -------------------------------------------------------------------------

    def request_stop(self, *_: Any) -> None:
        """Ask the daemon to stop after the current step (safe from a signal handler)."""
        self.stop.set()

    def install_signal_handlers(self) -> None:
        """SIGTERM and SIGINT request a clean stop (call from the main thread only)."""
        signal.signal(signal.SIGTERM, self.request_stop)
        signal.signal(signal.SIGINT, self.request_stop)

    @property
    def stopping(self) -> bool:
        return self.stop.is_set()

    def check_stop(self) -> None:
        """Raise `StopRequested` if a stop was requested."""
        if self.stop.is_set():
            raise StopRequested()

    def sleep(self, seconds: float) -> None:
        """Sleep up to ``seconds``; raise `StopRequested` if a stop is requested meanwhile."""
        if self.stop.wait(max(0.0, seconds)):
            raise StopRequested()

    # -- isolation ------------------------------------------------------------------------

    def guarded(self, what: str, fn: Callable[[], Any]) -> Any:
        """Run ``fn``; on an exception log it with ``what``, count it, and return None, or raise
        `DaemonHalted` once ``max_consecutive_failures`` steps in a row have failed. An RPC or IPFS
        node that does not answer (`ServiceUnavailable`), or an IPFS node that reaches no peer
        (`IpfsIsolated`: the peer keeper is made to redial at once, as it is when a service answers
        again after an outage), is not counted while it has been down for
        at most ``outage_tolerance_s`` seconds (config, default 300): the step is retried with
        `backoff_s`, the log says how long it has been down, ``tenzro_service_outage_seconds``
        shows it. A success resets both. `StopRequested` and `DaemonHalted` pass through."""
        try:
            out = fn()
        except (StopRequested, DaemonHalted):
            raise
        except (ServiceUnavailable, IpfsIsolated) as exc:  # a node down, or one that reaches no peer
            if isinstance(exc, IpfsIsolated) and self.ipfs_peers is not None:
                self.ipfs_peers.check_soon()  # redial now, not at the keeper's next check (up to 10 s on)
            if self._ride_out(what, exc):
                return None
            return self._failed(what, exc)
        except Exception as exc:  # noqa: BLE001 - isolation: log, count, maybe halt
            return self._failed(what, exc)
        self.consecutive_failures = 0
        if self._outage_since is not None:
            log.warning("%s: the service answers again after %.0f s", what, time.monotonic() - self._outage_since)
            self._outage_since = None
            if self.ipfs_peers is not None:  # a link back after a cut: its node's peers dropped meanwhile
                self.ipfs_peers.check_soon()
            if self.metrics is not None and hasattr(self.metrics, "service_outage"):
                self.metrics.service_outage.set(0)
        return out

    def _ride_out(self, what: str, exc: TenzroError) -> bool:
        """An RPC or IPFS node that does not answer (or reaches no peer): retry (with `backoff_s`) for up to
        ``outage_tolerance_s`` seconds from the first failure, logging how long it has been down;
        True while within that time."""
        now = time.monotonic()
        if self._outage_since is None:
            self._outage_since = now
        down = now - self._outage_since
        if self.metrics is not None and hasattr(self.metrics, "service_outage"):
            self.metrics.service_outage.set(down)
        if down > self.outage_tolerance_s:
            return False
        self.consecutive_failures = min(self.consecutive_failures + 1, 16)  # grows the backoff only
        log.warning("%s: %s (down %.0f s of the %.0f s this daemon rides out; retrying in %.1f s)", what, exc,
                    down, self.outage_tolerance_s, self.backoff_s())
        return True

    def _failed(self, what: str, exc: Exception) -> None:
        """Count a failed step; raise `DaemonHalted` after ``max_consecutive_failures`` in a row."""
        self.failures += 1
        self.consecutive_failures += 1
        if self.metrics is not None:
            self.metrics.handler_errors.labels(event=what).inc()
        log.error("%s failed: %s: %s [failure %d/%d in a row]", what, type(exc).__name__, exc,
                  self.consecutive_failures, self.max_consecutive_failures,
                  exc_info=log.isEnabledFor(logging.DEBUG) or not isinstance(exc, TenzroError))
        if self.consecutive_failures >= self.max_consecutive_failures:
            log.critical("%s halting: %d consecutive failures, last in %s: %s", self.role,
                         self.consecutive_failures, what, exc)
            raise DaemonHalted(f"{self.role} halted after {self.consecutive_failures} consecutive failures; "
                               f"last in {what}: {type(exc).__name__}: {exc}") from exc

    def backoff_s(self, base_s: float = 0.5, cap_s: float = 8.0) -> float:
        """Delay before retrying after the n-th consecutive failure: ``base_s * 2**(n-1)``,
        at most ``cap_s`` seconds (so a brief RPC or IPFS outage is ridden out)."""
        n = max(1, self.consecutive_failures)
        return min(cap_s, base_s * 2 ** (n - 1))

    # -- one run --------------------------------------------------------------------------

    def serve(self, task_id: bytes) -> bool:
        """Serve run ``task_id`` until it is over for this role; False when the run was left to
        others without being served (it does not count towards ``max_runs``). Each role."""
        raise NotImplementedError(f"{type(self).__name__}.serve")

    def reset_run(self) -> None:
        """Forget the state of the run served last (each role)."""
        raise NotImplementedError(f"{type(self).__name__}.reset_run")

    def open_task(self, task_id: bytes):
        """Make ``task_id`` the current run: set ``self.task_id`` and the log context, read the run
        (``getRun``), announce and find the parties' IPFS nodes (`track_peers`) and call the role's
        ``prepare(run)`` (spec, runtime, ...). Returns the `RunView`."""
        self.task_id = task_id
        set_log_context(task=task_id)
        run = self.chain.get_run(task_id)
        self.track_peers(task_id)
        self.prepare(run)
        return run

    def prepare(self, run) -> None:
        """Load what the role needs to serve ``run`` (a `RunView`): spec, runtime, ... (each role)."""
        raise NotImplementedError(f"{type(self).__name__}.prepare")

    def step(self) -> Any:
        """One idempotent unit of work of the current run; ``"done"`` when the run is over (each role)."""
        raise NotImplementedError(f"{type(self).__name__}.step")

    def step_until_done(self, what: str) -> None:
        """Call `step` under `guarded` (failures named ``what``) until it returns ``"done"``;
        after a failed step, sleep `backoff_s` (bounded) before the next try."""
        while True:
            out = self.guarded(what, self.step)
            if out == "done":
                return
            if out is None:
                self.sleep(self.backoff_s())

    # -- enrollment deadline --------------------------------------------------------------

    def settle_enrollment(self, run: RunView, *, open_round: bool = True) -> str | None:
        """Once an Enrolling run's enrollment deadline (chain time) has passed: open round 0 with
        the trainers enrolled (``closeEnrollment``, >= K of them; only with ``open_round``) or
        cancel the run, which can never train (``cancelTask``, fewer than K: pool and stakes
        refunded). Anyone may do either (the registry refuses both before the deadline); another
        party doing it first (its transaction mined before ours, ours refused or reverted) is fine.

        Returns:
            ``"opened"``, ``"cancelled"``, ``"moved"`` (someone else did it first) or None (nothing
            to do: the deadline has not passed, the run is not Enrolling, or opening is not ours).
        Raises:
            ChainRevert / TxFailed: a refusal while the run is still Enrolling.
        """
        from tenzro_operator.errors import ChainRevert, TxFailed

        if run.status != RunStatus.ENROLLING or self.chain_now() <= run.enrollment_deadline:
            return None
        can_train = run.enrolled_count >= run.quorum
        if can_train and not open_round:
            return None
        self.nudge_devnet(run.enrollment_deadline)
        try:
            if can_train:
                self.chain.close_enrollment(run.task_id)
                log.info("enrollment deadline passed: opened round 0 with %d of %d trainers", run.enrolled_count,
                         run.trainer_count)
                return "opened"
            self.chain.cancel_task(run.task_id)
            log.warning("enrollment deadline passed with %d trainers enrolled, fewer than K=%d: cancelled the run "
                        "(pool and stakes refunded)", run.enrolled_count, run.quorum)
            return "cancelled"
        except (ChainRevert, TxFailed) as exc:
            now = self.chain.get_run(run.task_id).status
            if now == RunStatus.ENROLLING:
                raise
            log.info("the run left enrollment meanwhile (now %s): %s", now.name, exc)
            return "moved"

    def nudge_devnet(self, deadline: int) -> None:
        """`ChainClient.nudge_devnet`: on a devnet, mine an empty block while the head is still
        stamped at or before ``deadline`` (unix seconds)."""
        self.chain.nudge_devnet(deadline)

    # -- time -----------------------------------------------------------------------------

    def chain_now(self, max_age_s: float = 0.0) -> int:
        """Chain time (unix seconds), from the chain alone: the latest time the chain showed (the
        head block's timestamp; on a devnet, whose blocks are mined only for transactions, the
        pending block's, which anvil stamps with its own clock, increaseTime included) plus the
        seconds elapsed since it was read (``time.monotonic()``). Never the wall clock: a host
        clock set fast cannot close a window early (issue #24), and the estimate never runs ahead
        of the chain by more than the chain's own clock does. Never decreases.

        Read from the chain again unless it was read within ``max_age_s`` seconds (the syncer's
        intake passes 1 s: one head read a second however many messages arrive). Thread-safe:
        one thread reads, the others wait for its answer.

        Raises:
            RpcUnavailable: the chain does not answer (when it is read).
        """
        lock = self.__dict__.setdefault("_chain_time_lock", threading.Lock())
        with lock:
            base, read_at = self.__dict__.get("_chain_time", (None, 0.0))
            if base is None or time.monotonic() - read_at >= max_age_s:
                ts = None
                if self.chain.chain_id in (31337, 1337):
                    try:
                        ts = self.chain.block_timestamp("pending")
                    except Exception:  # noqa: BLE001 - a devnet without a pending block: the head
                        ts = None
                if ts is None:
                    ts = self.chain.block_timestamp("latest")
                read_at = time.monotonic()
                base = ts - read_at if base is None else max(base, ts - read_at)
                self._chain_time = (base, read_at)
            return int(time.monotonic() + base)


# ----------------------------------------------------------------------------- wiring


def open_services(config, metrics: Any = None, *, prompt: bool = True):
    """Unlock the config's keystore and connect to the chain and IPFS (the start-up checks that
    need no daemon). Returns ``(account, chain, ipfs)``.

    Raises:
        ConfigError: no keystore configured.
        KeystoreError: no password / wrong password (the password is never shown).
        RpcUnavailable / DeploymentError: the chain does not answer or does not match the record.
    """
    from tenzro_operator.chain import ChainClient
    from tenzro_operator.errors import ConfigError
    from tenzro_operator.ipfs import IpfsClient
    from tenzro_operator.keys import unlock

    if config.keystore is None:
        raise ConfigError("<config>", "keystore", "a keystore is required to run a daemon")
    account = unlock(config.keystore, config.password_env, prompt=prompt)
    chain = ChainClient(config.node_rpc, config.deployments, account, metrics=metrics,
                        max_fee_per_gas=config.max_fee_per_gas_wei, replace_after_s=config.tx_replace_after_s)
    ipfs = IpfsClient(config.ipfs_api)
    return account, chain, ipfs


def run_daemon_cli(daemon_cls, config_cls, config_path, role: str, **overrides: Any) -> int:
    """Load the config, configure logging, open the services, run the daemon in the foreground
    with SIGTERM/SIGINT handlers. Every `TenzroError` becomes one line on stderr and exit code 1."""
    import sys

    from tenzro_operator.config import load_config
    from tenzro_operator.logs import configure_logging

    try:
        config = load_config(config_path, config_cls, **{k: v for k, v in overrides.items() if v is not None})
        configure_logging(config.log_level, config.log_format, role=role)
        account, chain, ipfs = open_services(config)
        daemon = daemon_cls(config, account, chain, ipfs)
        daemon.install_signal_handlers()
        return daemon.run()
    except TenzroError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
