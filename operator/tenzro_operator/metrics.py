"""Prometheus metrics of the daemons, each role in its own registry (several daemons in one test
process do not collide), served by `start_metrics_server` (default port 9101).

Names (all prefixed ``tenzro_``). Every series about one run carries ``task``, the run's
0x-hex bytes32 id (`task_label`), so one Prometheus scrapes many runs and daemons apart:

* trainer: ``trainer_submitted_total{task}``, ``trainer_accepted_total{task}``,
  ``trainer_missed_rounds_total{task}``, ``trainer_inner_step_seconds{task}`` (histogram,
  seconds per inner AdamW step), ``trainer_loss{task}`` (gauge, mean train loss of the last
  round), ``trainer_round{task}`` (gauge).
* syncer: ``syncer_round_latency_seconds{task}`` (histogram, round opened -> finalized),
  ``syncer_submissions_total{task}``, ``syncer_rejections_total{task,reason}``,
  ``syncer_round{task}`` (gauge), ``syncer_heldout_loss{task}`` (gauge),
  ``syncer_fees_claimed_tnzo_total{task}`` (TNZO).
* watcher: ``watcher_rounds_checked_total{task}``, ``watcher_mismatches_total{task}`` (rounds
  whose replay differs from the commit), ``watcher_lag_blocks{task}`` and
  ``watcher_lag_seconds{task}`` (histograms: blocks and seconds between a round's
  ``RoundCommitted`` block and its check), ``watcher_round{task}`` (gauge, last round checked).
* every role, about the daemon rather than one run: ``chain_tx_total{method}``,
  ``chain_tx_failures_total{method,reason}``, ``ipfs_bytes_total{direction="in"|"out"}``,
  ``handler_errors_total{event}``.

    m = TrainerMetrics()
    m.submitted.labels(task=task_label(task_id)).inc()
    start_metrics_server(9101, m)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from tenzro_operator.errors import TenzroError

__all__ = ["DEFAULT_METRICS_PORT", "RoleMetrics", "SyncerMetrics", "TrainerMetrics", "WatcherMetrics",
           "start_metrics_server", "task_label"]

DEFAULT_METRICS_PORT = 9101
_TASK = ["task"]


def task_label(task_id: bytes | str) -> str:
    """The ``task`` label of a run: its bytes32 id as ``0x`` + 64 lower-case hex digits.

    Raises:
        ValueError: not 32 bytes (or 64 hex digits).
    """
    if isinstance(task_id, str):
        text = task_id[2:] if task_id.startswith(("0x", "0X")) else task_id
        try:
            task_id = bytes.fromhex(text)
        except ValueError:
            raise ValueError(f"task id {task_id!r} is not hex") from None
    if len(task_id) != 32:
        raise ValueError(f"task id must be 32 bytes, got {len(task_id)}")
    return "0x" + bytes(task_id).hex()


@dataclass
class RoleMetrics:
    """Metrics every role has; holds its own `CollectorRegistry`."""

    role: str = "operator"
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        self.chain_tx = Counter("tenzro_chain_tx", "transactions sent", ["method"], registry=r)
        self.chain_tx_failures = Counter("tenzro_chain_tx_failures", "transactions that failed or were refused",
                                         ["method", "reason"], registry=r)
        self.ipfs_bytes = Counter("tenzro_ipfs_bytes", "bytes moved to/from IPFS", ["direction"], registry=r)
        self.handler_errors = Counter("tenzro_handler_errors", "event handler exceptions", ["event"], registry=r)
        self.service_outage = Gauge("tenzro_service_outage_seconds",
                                    "seconds the RPC or IPFS node has not answered (0 when it does)", registry=r)

    # hooks the chain client and IPFS wrappers call
    def tx_sent(self, method: str) -> None:
        self.chain_tx.labels(method=method).inc()

    def tx_failed(self, method: str, reason: str) -> None:
        self.chain_tx_failures.labels(method=method, reason=reason).inc()

    def ipfs_in(self, n_bytes: int) -> None:
        self.ipfs_bytes.labels(direction="in").inc(n_bytes)

    def ipfs_out(self, n_bytes: int) -> None:
        self.ipfs_bytes.labels(direction="out").inc(n_bytes)


@dataclass
class TrainerMetrics(RoleMetrics):
    role: str = "trainer"

    def __post_init__(self) -> None:
        super().__post_init__()
        r = self.registry
        self.submitted = Counter("tenzro_trainer_submitted", "outer gradients submitted", _TASK, registry=r)
        self.accepted = Counter("tenzro_trainer_accepted", "submissions accepted by commitRound", _TASK,
                                registry=r)
        self.missed_rounds = Counter("tenzro_trainer_missed_rounds", "rounds with no accepted submission", _TASK,
                                     registry=r)
        self.inner_step_seconds = Histogram(
            "tenzro_trainer_inner_step_seconds", "wall time of one inner AdamW step (seconds)", _TASK, registry=r,
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
        self.loss = Gauge("tenzro_trainer_loss", "mean inner training loss of the last round", _TASK, registry=r)
        self.round = Gauge("tenzro_trainer_round", "round being trained", _TASK, registry=r)


@dataclass
class SyncerMetrics(RoleMetrics):
    role: str = "syncer"

    def __post_init__(self) -> None:
        super().__post_init__()
        r = self.registry
        self.round_latency = Histogram(
            "tenzro_syncer_round_latency_seconds", "round opened -> finalized (seconds)", _TASK, registry=r,
            buckets=(0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600))
        self.submissions = Counter("tenzro_syncer_submissions", "submissions seen", _TASK, registry=r)
        self.rejections = Counter("tenzro_syncer_rejections", "submissions rejected", ["task", "reason"],
                                  registry=r)
        # per run: one syncer serves every run it is elected for at once
        self.round = Gauge("tenzro_syncer_round", "open round", _TASK, registry=r)
        self.heldout_loss = Gauge("tenzro_syncer_heldout_loss", "held-out loss after the last round", _TASK,
                                  registry=r)
        self.fees_claimed = Counter("tenzro_syncer_fees_claimed_tnzo", "syncer fees claimed after seals (TNZO)",
                                    _TASK, registry=r)


@dataclass
class WatcherMetrics(RoleMetrics):
    role: str = "watcher"

    def __post_init__(self) -> None:
        super().__post_init__()
        r = self.registry
        self.rounds_checked = Counter("tenzro_watcher_rounds_checked", "committed rounds replayed", _TASK,
                                      registry=r)
        self.mismatches = Counter("tenzro_watcher_mismatches", "rounds whose replay differs from the commit",
                                  _TASK, registry=r)
        self.lag_blocks = Histogram("tenzro_watcher_lag_blocks", "blocks between a round's commit and its check",
                                    _TASK, registry=r, buckets=(0, 1, 2, 4, 8, 16, 32, 64, 128, 256))
        self.lag_seconds = Histogram("tenzro_watcher_lag_seconds", "seconds between a round's commit (its block's "
                                     "timestamp) and its check", _TASK, registry=r,
                                     buckets=(0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600))
        self.round = Gauge("tenzro_watcher_round", "last round checked", _TASK, registry=r)
        self.challenges_sent = Counter("tenzro_watcher_challenges_sent", "fraud proofs sent (root flow)", _TASK,
                                       registry=r)
        self.challenges_won = Counter("tenzro_watcher_challenges_won", "fraud proofs the registry upheld", _TASK,
                                      registry=r)
        self.bounty = Counter("tenzro_watcher_bounty_tnzo", "bounties won, TNZO", _TASK, registry=r)


def start_metrics_server(port: int = DEFAULT_METRICS_PORT, metrics: RoleMetrics | None = None,
                         addr: str = "127.0.0.1") -> int:
    """Serve ``metrics.registry`` at ``http://addr:port/metrics`` from a daemon thread.

    ``port=0`` picks a free port. Returns the port served.

    Raises:
        TenzroError: the port is taken.
    """
    registry = metrics.registry if metrics is not None else None
    try:
        server, _thread = start_http_server(port, addr=addr, registry=registry) if registry is not None \
            else start_http_server(port, addr=addr)
    except OSError as exc:
        raise TenzroError(f"metrics port {addr}:{port} is not available ({exc.strerror}); "
                          "set metrics_port in the config (0 = any free port)") from None
    return server.server_port
