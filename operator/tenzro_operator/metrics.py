"""Prometheus metrics of the daemons, each role in its own registry (several daemons in one test
process do not collide), served by `start_metrics_server` (default port 9101).

Names (all prefixed ``tenzro_``):

* trainer: ``trainer_submitted_total``, ``trainer_accepted_total``, ``trainer_missed_rounds_total``,
  ``trainer_inner_step_seconds`` (histogram, seconds per inner AdamW step), ``trainer_loss``
  (gauge, mean train loss of the last round), ``trainer_round`` (gauge).
* syncer: ``syncer_round_latency_seconds`` (histogram, round opened -> finalized),
  ``syncer_submissions_total``, ``syncer_rejections_total{reason}``, ``syncer_round{task}``
  (gauge), ``syncer_heldout_loss{task}`` (gauge); ``task`` is the run's 0x-hex bytes32 id.
* both: ``chain_tx_total{method}``, ``chain_tx_failures_total{method,reason}``,
  ``ipfs_bytes_total{direction="in"|"out"}``, ``handler_errors_total{event}``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from tenzro_operator.errors import TenzroError

__all__ = ["DEFAULT_METRICS_PORT", "RoleMetrics", "SyncerMetrics", "TrainerMetrics", "start_metrics_server"]

DEFAULT_METRICS_PORT = 9101


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
        self.submitted = Counter("tenzro_trainer_submitted", "outer gradients submitted", registry=r)
        self.accepted = Counter("tenzro_trainer_accepted", "submissions accepted by finalizeRound", registry=r)
        self.missed_rounds = Counter("tenzro_trainer_missed_rounds", "rounds with no accepted submission", registry=r)
        self.inner_step_seconds = Histogram(
            "tenzro_trainer_inner_step_seconds", "wall time of one inner AdamW step (seconds)", registry=r,
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
        self.loss = Gauge("tenzro_trainer_loss", "mean inner training loss of the last round", registry=r)
        self.round = Gauge("tenzro_trainer_round", "round being trained", registry=r)


@dataclass
class SyncerMetrics(RoleMetrics):
    role: str = "syncer"

    def __post_init__(self) -> None:
        super().__post_init__()
        r = self.registry
        self.round_latency = Histogram(
            "tenzro_syncer_round_latency_seconds", "round opened -> finalized (seconds)", registry=r,
            buckets=(0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600))
        self.submissions = Counter("tenzro_syncer_submissions", "submissions seen", registry=r)
        self.rejections = Counter("tenzro_syncer_rejections", "submissions rejected", ["reason"], registry=r)
        # per run: one syncer serves every run it is elected for at once
        self.round = Gauge("tenzro_syncer_round", "open round", ["task"], registry=r)
        self.heldout_loss = Gauge("tenzro_syncer_heldout_loss", "held-out loss after the last round", ["task"],
                                  registry=r)
        self.fees_claimed = Counter("tenzro_syncer_fees_claimed_tnzo", "syncer fees claimed after seals (TNZO)",
                                    registry=r)


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
