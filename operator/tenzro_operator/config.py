"""Role configs: YAML files plus ``TENZRO_*`` environment variables (pydantic-settings).

Precedence, highest first: keyword arguments, environment variables
(``TENZRO_NODE_RPC``, nested with ``__``: ``TENZRO_INNER__LR``), the YAML file, defaults.

``trainer.yaml`` (see ``operator/examples/trainer.yaml``)::

    node_rpc: http://127.0.0.1:8545
    ipfs_api: http://127.0.0.1:5001
    ipfs_bootstrap: []             # other parties' IPFS nodes: ["/ip4/<host>/tcp/4001/p2p/<peer id>"]
    deployments: deployments/local.json
    keystore: keys/trainer-0.json
    password_env: TENZRO_KEYSTORE_PASSWORD
    task_id: train-demo            # optional: discover open runs
    did: did:tenzro:machine:t0
    stake: "100"                   # tokens ("100"), or atto-units ("100000000000000000000atto")
    inner: {lr: 3.0e-4, weight_decay: 0.01, betas: [0.9, 0.95], batch_size: 64}
    device: cpu
    dtype: fp32
    gradient_checkpointing: false
    metrics_port: 9101
    data_dir: .tenzro/trainer-0
    log_level: INFO

Inner hyperparameters left out keep the defaults of ``tenzro_trainer.config.InnerConfig``
(they are not repeated here); ``TrainerConfig.inner_config(steps, seed)`` builds it.
"""

from __future__ import annotations

import contextvars
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from tenzro_operator.did import check_did
from tenzro_operator.errors import ConfigError
from tenzro_operator.units import parse_tokens

__all__ = [
    "CommonConfig",
    "GatewayConfig",
    "InnerSettings",
    "SponsorConfig",
    "SyncerConfig",
    "TrainerConfig",
    "WatcherConfig",
    "load_config",
]

DEFAULT_METRICS_PORT = 9101
_yaml_data: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("_yaml_data", default=None)


def _http_url(v: str) -> str:
    if not v.startswith(("http://", "https://")):
        raise ValueError(f"must be an http(s) URL, got {v!r}")
    return v


HttpUrlText = Annotated[str, AfterValidator(_http_url)]  # an http(s) URL kept as written


class _YamlSource(PydanticBaseSettingsSource):
    """Settings source: the YAML mapping `load_config` read (lowest priority before defaults)."""

    def get_field_value(self, field, field_name):  # pragma: no cover - unused (we return all at once)
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(_yaml_data.get() or {})


class CommonConfig(BaseSettings):
    """Settings every role has: where the chain, IPFS, deployments and key are, logs, metrics."""

    model_config = SettingsConfigDict(env_prefix="TENZRO_", env_nested_delimiter="__", extra="forbid",
                                      validate_default=True)
    _env_overrides: list[tuple[str, str]] = PrivateAttr(default_factory=list)  # (TENZRO_* variable, field)

    node_rpc: str = "http://127.0.0.1:8545"
    ipfs_api: str = "http://127.0.0.1:5001"
    ipfs_bootstrap: list[str] = Field(default_factory=list, description="multiaddrs "
                                      "(/ip4/<host>/tcp/<port>/p2p/<peer id>) of other parties' IPFS nodes that "
                                      "the daemons connect their node to at start and again when one drops "
                                      "(tenzro_operator.ipfs.peers); bitswap fetches from connected peers only")
    ipfs_peer_check_s: float = Field(default=10.0, gt=0, description="seconds between checks that the "
                                     "ipfs_bootstrap peers are still connected")
    ipfs_announce: list[str] | None = Field(default=None, max_length=8, description="multiaddrs of this party's IPFS node "
                                            "that it announces, signed, on each run's nodes topic (trainer, "
                                            "syncer: tenzro_operator.peer_book), at most 8; None = the "
                                            "node's own listen addresses (its /api/v0/id); [] = announce none")
    ipfs_dial_announced: bool = Field(default=True, description="connect this party's IPFS node to the nodes "
                                      "the run's parties announce (a syncer or watcher: every enrolled "
                                      "trainer's and the syncer's; a trainer: the syncer's), beside "
                                      "ipfs_bootstrap")
    ipfs_dial_private: bool = Field(default=False, description="dial an announced node on a loopback, "
                                    "private (RFC 1918, fc00::/7) or link-local address, or by DNS name, too; "
                                    "false = public IP addresses only (ipfs_bootstrap is dialled as written)")
    deployments: Path = Path("deployments/local.json")
    keystore: Path | None = None
    password_env: str = "TENZRO_KEYSTORE_PASSWORD"
    metrics_port: int | None = Field(default=DEFAULT_METRICS_PORT, ge=0, le=65535,
                                     description="Prometheus port; 0 = any free port; null = no server")
    data_dir: Path = Path(".tenzro")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["text", "kv", "json"] = Field(
        default="text", description="log lines: text (human), kv (key=value) or json (one object per line)")
    poll_interval_s: float = Field(default=1.0, gt=0, description="seconds between chain polls")
    # -- hardening (issue 14): fees, limits on what a posted run may make this operator fetch or build
    max_fee_per_gas_gwei: float | None = Field(default=None, gt=0, description="fee cap per gas in gwei "
                                               "(EIP-1559 maxFeePerGas); None = no cap")
    tx_replace_after_s: float | None = Field(default=20.0, gt=0, description="seconds before an unmined "
                                             "transaction is replaced on its nonce with 12.5 % higher fees; "
                                             "None = never")
    outage_tolerance_s: float = Field(default=300.0, ge=0, description="how long a daemon rides out an "
                                      "RPC or IPFS node that does not answer (retrying with bounded exponential "
                                      "backoff, logged and in tenzro_service_outage_seconds) before it halts, seconds")
    max_dataset_bytes: int = Field(default=256 * 1024 * 1024, gt=0, description="largest task dataset fetched "
                                   "from IPFS, bytes")
    max_model_params: int = Field(default=1_000_000_000, gt=0, description="largest model a task may ask for, "
                                  "parameters (checked before anything is built)")
    allow_sponsors: list[str] | None = Field(default=None, description="discovery only serves runs posted by "
                                             "these addresses; None = any sponsor")
    min_reward_pool: str | None = Field(default=None, description="discovery skips runs whose reward pool is "
                                        "below this (tokens or '<n>atto'); None = no minimum")

    @field_validator("allow_sponsors")
    @classmethod
    def _sponsors(cls, v):
        if v is None:
            return v
        from eth_utils import is_address, to_checksum_address

        bad = [a for a in v if not is_address(a)]
        if bad:
            raise ValueError(f"not addresses: {bad}")
        return [to_checksum_address(a) for a in v]

    @field_validator("min_reward_pool")
    @classmethod
    def _min_pool(cls, v):
        if v is not None:
            parse_tokens(v)
        return v

    @property
    def min_reward_pool_atto(self) -> int:
        """``min_reward_pool`` in atto-units (0 when unset)."""
        return 0 if self.min_reward_pool is None else parse_tokens(self.min_reward_pool)

    @property
    def max_fee_per_gas_wei(self) -> int | None:
        """``max_fee_per_gas_gwei`` in wei per gas, or None."""
        return None if self.max_fee_per_gas_gwei is None else int(self.max_fee_per_gas_gwei * 10**9)

    @field_validator("ipfs_bootstrap", "ipfs_announce")
    @classmethod
    def _bootstrap(cls, v: list[str] | None) -> list[str] | None:
        from tenzro_operator.ipfs.peers import check_bootstrap_addr

        return v if v is None else [check_bootstrap_addr(a) for a in v]

    @field_validator("node_rpc", "ipfs_api")
    @classmethod
    def _url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError(f"must be an http(s) URL, got {v!r}")
        return v.rstrip("/")

    @classmethod
    def settings_customise_sources(cls, settings_cls, init_settings, env_settings, dotenv_settings,
                                   file_secret_settings):
        return init_settings, env_settings, _YamlSource(settings_cls)

    @property
    def state_dir(self) -> Path:
        """Per-role state (event checkpoints, outer optimizer state...): ``data_dir``, created."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        return self.data_dir


class InnerSettings(BaseModel):
    """Inner AdamW hyperparameters; None keeps ``tenzro_trainer.config.InnerConfig``'s default."""

    model_config = ConfigDict(extra="forbid")

    lr: float | None = Field(default=None, gt=0)
    weight_decay: float | None = Field(default=None, ge=0)
    betas: tuple[float, float] | None = None
    batch_size: int | None = Field(default=None, gt=0)
    grad_clip: float | None = None

    @field_validator("betas")
    @classmethod
    def _betas(cls, v):
        if v is not None and not all(0.0 <= b < 1.0 for b in v):
            raise ValueError(f"betas must be in [0, 1), got {v}")
        return v


class TrainerConfig(CommonConfig):
    """``trainer.yaml``: one trainer daemon."""

    task_id: str | None = Field(default=None, description="run to join; None = discover Enrolling runs")
    did: str = "did:tenzro:machine:trainer"
    stake: str | None = Field(default=None, description="stake in tokens or '<n>atto'; None = the run's minimum")
    inner: InnerSettings = Field(default_factory=InnerSettings)
    device: str = "cpu"
    devices: int | Literal["auto"] = Field(default=1, description="devices the inner loop runs on: 1 = in the "
                                           "daemon's process; N > 1 = one torchrun job of N ranks kept for the "
                                           "run (FSDP2: NCCL, one GPU a rank, on CUDA; gloo CPU processes "
                                           "otherwise, for tests); auto = this host's CUDA devices when device "
                                           "is cuda, else 1")
    dtype: Literal["fp32", "bf16"] = "fp32"
    gradient_checkpointing: bool = False
    dataset_path: Path | None = Field(default=None, description="local copy of the dataset (else fetched from IPFS)")
    max_runs: int | None = Field(default=1, ge=1, description="runs to join before exiting (without task_id); "
                                 "None = forever")
    # -- delivery of the signed submissions (`tenzro_operator.roles.delivery`)
    syncer_rpc: HttpUrlText | None = Field(default=None, description="URL of the syncer's submission "
                                           "endpoint (``tenzro_training_deliver``); every message published on "
                                           "pubsub is posted there too. None = the URL the run's syncer announces, "
                                           "signed, on its pubsub topic (none announced: pubsub only)")
    syncer_rpc_allow_private: bool = Field(default=False, description="post to an announced endpoint "
                                           "on a loopback, private (RFC 1918, fc00::/7) or link-local host too; "
                                           "false = public hosts only (a configured syncer_rpc is taken as "
                                           "written either way)")
    syncer_rpc_deadline_s: float = Field(default=3.0, gt=0, le=60, description="total time one "
                                         "delivery to the syncer's endpoint may take (connect, send, answer), "
                                         "seconds")
    syncer_rpc_max_response_bytes: int = Field(default=1 << 20, ge=1024, description="largest answer "
                                               "read from the syncer's endpoint, bytes; a larger one is dropped "
                                               "unread")
    force_onchain: bool = Field(default=False, description="also deliver every submission on-chain "
                                "(commitSubmission, then the reveal: two transactions per fragment, paid by the "
                                "trainer) from the first round, where no syncer can leave it out; false = only "
                                "after a commit left this trainer out without a true reason")
    publish_pubsub: bool = Field(default=True, description="publish the submissions on the task's "
                                 "pubsub topic; false = deliver them only to the syncer's endpoint (a network "
                                 "where libp2p pubsub does not reach)")

    @field_validator("stake")
    @classmethod
    def _stake(cls, v):
        if v is not None:
            parse_tokens(v)
        return v

    @field_validator("device")
    @classmethod
    def _device(cls, v):
        if not re.fullmatch(r"cpu|cuda(:\d+)?", v):
            raise ValueError(f"device must be cpu, cuda or cuda:N, got {v!r}")
        return v

    @field_validator("did")
    @classmethod
    def _did(cls, v):
        return check_did(v)

    @field_validator("devices")
    @classmethod
    def _devices(cls, v):
        if v != "auto" and v < 1:
            raise ValueError(f"devices must be 'auto' or at least 1, got {v}")
        return v

    def device_count(self) -> int:
        """Ranks of the inner loop: ``devices``, with ``auto`` resolved (CUDA devices of this host when
        ``device`` is cuda, at least 1; else 1)."""
        if self.devices != "auto":
            return self.devices
        if self.device.startswith("cuda"):
            import torch

            return max(1, torch.cuda.device_count())
        return 1

    @property
    def stake_atto(self) -> int | None:
        """Stake in token atto-units, or None (use the run's minimum)."""
        return None if self.stake is None else parse_tokens(self.stake)

    def inner_config(self, steps: int, seed: int = 0, **overrides: Any):
        """``tenzro_trainer.config.InnerConfig`` for a run with H = ``steps``: fields set in this
        config override the trainer's defaults; unset ones keep them."""
        from tenzro_trainer.config import InnerConfig

        kw: dict[str, Any] = {k: v for k, v in self.inner.model_dump().items() if v is not None}
        kw.update(steps=steps, seed=seed, device=self.device, dtype=self.dtype,
                  gradient_checkpointing=self.gradient_checkpointing)
        kw.update(overrides)
        return InnerConfig(**kw)


class SyncerConfig(CommonConfig):
    """``syncer.yaml``: the syncer daemon."""

    task_id: str | None = Field(default=None, description="run to serve; None = every run it is elected for")
    register_stake: str | None = Field(default=None, description="stake to register as syncer candidate "
                                       "(tokens or '<n>atto') if not registered yet")
    outer_lr: float | None = Field(default=None, gt=0, description="None = OuterConfig default (0.7)")
    outer_momentum: float | None = Field(default=None, ge=0, lt=1, description="None = OuterConfig default (0.9)")
    finalize_early: bool = Field(default=True, description="commit as soon as the commit phase has closed and "
                                 "every fragment has K valid submissions (false: at the round deadline)")
    close_enrollment: bool = Field(default=True, description="once a run's enrollment deadline has passed, open "
                                   "round 0 with the >= K trainers enrolled, or cancel a run short of K (refunds "
                                   "pool and stakes); anyone may, the registry refuses either before the deadline")
    device: str = "cpu"
    metrics_port: int | None = Field(default=9102, ge=0, le=65535)
    max_runs: int | None = Field(default=1, ge=1, description="runs to serve before exiting (without task_id; "
                                 "served at once); None = every run it is elected for, until stopped")
    # -- the submission endpoint (`tenzro_operator.roles.delivery`, operator/RPC.md)
    submission_rpc_port: int | None = Field(default=None, ge=0, le=65535, description="serve "
                                            "``tenzro_training_deliver`` (JSON-RPC 2.0 over HTTP) on this port "
                                            "while collecting a run's submissions, and announce it on the run's "
                                            "syncer topic; 0 = any free port; None = off (pubsub only). 9112 is "
                                            "the conventional port")
    submission_rpc_host: str = Field(default="127.0.0.1", description="address the submission endpoint listens "
                                     "on (the default serves this machine only; 0.0.0.0 for remote trainers)")
    submission_rpc_url: HttpUrlText | None = Field(default=None, description="URL announced to trainers; None = "
                                           "http://<submission_rpc_host>:<port>/ (a wildcard host announces "
                                           "nothing: set this)")
    submission_rpc_max_request_bytes: int = Field(default=256 * 1024, gt=0, description="largest HTTP request "
                                                  "body of the submission endpoint, bytes (HTTP 413 above)")

    @property
    def register_stake_atto(self) -> int | None:
        return None if self.register_stake is None else parse_tokens(self.register_stake)

    def outer_config(self):
        """``tenzro_trainer.config.OuterConfig`` with this config's overrides."""
        from tenzro_trainer.config import OuterConfig

        kw = {}
        if self.outer_lr is not None:
            kw["lr"] = self.outer_lr
        if self.outer_momentum is not None:
            kw["momentum"] = self.outer_momentum
        return OuterConfig(**kw)


class WatcherConfig(CommonConfig):
    """``watcher.yaml``: the watcher daemon (``tenzro watcher run``, `tenzro_operator.roles.watcher`),
    which replays each committed round as it lands and reports every mismatch.

    ``keystore`` is optional: with one the watcher sends the fraud proof of a wrong root-flow round
    (no bond; the bounty is 10 % of the syncer's bond), without one it only reports."""

    task_id: str | None = Field(default=None, description="run to watch; None = every run (discovery)")
    max_runs: int | None = Field(default=None, ge=1, description="without task_id: runs to watch to their seal "
                                 "before exiting; None = every run, until stopped")
    include_sealed: bool = Field(default=False, description="discovery also replays runs already sealed when "
                                 "first seen (default: only runs still training or completed)")
    report_path: Path | None = Field(default=None, description="JSON-lines file of mismatches (one line per "
                                     "round that differs); None = <data_dir>/watcher-mismatches.jsonl")
    confirmations: int = Field(default=0, ge=0, description="blocks an event must be buried under before it is "
                               "read")
    reorg_tail_blocks: int = Field(default=64, ge=2, description="blocks below the head read one by one with "
                                   "their hashes checked (the deepest reorg survived)")
    max_consecutive_failures: int = Field(default=5, ge=1, description="failed polls of one run in a row "
                                          "before the watcher gives that run up")
    discover_timeout_s: float = Field(default=600.0, gt=0, description="with task_id: how long to wait for "
                                      "the run to be posted, seconds")
    metrics_port: int | None = Field(default=9103, ge=0, le=65535)


class SponsorConfig(CommonConfig):
    """``sponsor.yaml``: posting a task and watching it."""

    spec: Path | None = Field(default=None, description="task spec JSON")
    dataset_path: Path | None = Field(default=None, description="dataset file to pin (long format)")
    approve_extra: str = Field(default="0", description="extra allowance beyond the reward pool (tokens)")
    metrics_port: int | None = Field(default=None, ge=0, le=65535)


class GatewayConfig(CommonConfig):
    """``gateway.yaml``: the JSON-RPC gateway (``tenzro gateway run``, `tenzro_operator.gateway`).

    ``keystore`` is the gateway's own *relayer* account, which pays the gas of the trainers'
    signed submissions it relays (``tenzro_training_submitGradient``); None = that method answers
    an error. Users' transactions arrive signed: the gateway never holds their keys."""

    host: str = Field(default="127.0.0.1", description="address to listen on (the default serves this machine only)")
    port: int = Field(default=8547, ge=0, le=65535, description="TCP port; 0 = any free port")
    max_request_bytes: int = Field(default=1024 * 1024, gt=0, description="largest HTTP request body, bytes; "
                                   "a larger one is answered with a JSON-RPC error (HTTP 413)")
    max_batch: int = Field(default=100, ge=1, description="most calls in one batch request")
    preflight: bool = Field(default=True, description="simulate a signed transaction (eth_call as its sender) "
                            "and refuse it with the decoded revert before broadcasting; false = relay it as is")
    receipt_timeout_s: float = Field(default=60.0, gt=0, description="how long a write waits for its receipt, "
                                     "seconds")
    max_connections: int = Field(default=256, ge=1, description="connections served at a time; one more is "
                                 "answered HTTP 503")
    read_timeout_s: float = Field(default=10.0, gt=0, description="seconds a client has to send a request's "
                                  "headers, and again its body (HTTP 408 and closed after); also the idle time "
                                  "of a kept-alive connection")
    read_workers: int = Field(default=8, ge=1, description="threads answering reads (listRuns, getRun, getReceipt)")
    write_workers: int = Field(default=2, ge=1, description="threads relaying writes, each waiting up to "
                               "receipt_timeout_s; a write finding all of them taken is answered -32008 (busy)")


C = TypeVar("C", bound=CommonConfig)


def _field_path(loc: tuple) -> str:
    return ".".join(str(p) for p in loc) or "<root>"


def _known_fields(cls: type[BaseModel], parents: tuple) -> list[str]:
    """Field names of the (nested) model a field path's parents lead to: ``inner.lrr`` -> InnerSettings'."""
    model = cls
    for name in parents:
        field = model.model_fields.get(str(name))
        sub = field.annotation if field is not None else None
        if not (isinstance(sub, type) and issubclass(sub, BaseModel)):
            break
        model = sub
    return sorted(model.model_fields)


def env_overrides(data: dict, cls: type[BaseModel]) -> list[tuple[str, str]]:
    """``(variable, field)`` for each top-level field the YAML sets that a ``TENZRO_*`` variable
    overrides with another value (the variable wins, pydantic-settings' order): what a daemon logs at
    start-up, so an exported ``TENZRO_NODE_RPC`` left in a shell does not win silently."""
    out = []
    for key, value in data.items():
        var = f"TENZRO_{str(key).upper()}"
        env = os.environ.get(var)
        if key in cls.model_fields and env is not None and env != str(value):
            out.append((var, str(key)))
    return out


def load_config(path: str | Path | None, cls: type[C], **overrides: Any) -> C:
    """Load a role config from a YAML file (or only env + defaults when ``path`` is None).

    Relative paths inside the file (deployments, keystore, data_dir, spec, dataset_path)
    are resolved against the file's folder.

    Raises:
        ConfigError: missing file, YAML syntax error, a top level that is not a mapping,
            unknown or invalid fields (the message names the file and the field).
    """
    data: dict[str, Any] = {}
    source = str(path) if path is not None else "<env>"
    if path is not None:
        p = Path(path)
        try:
            text = p.read_text()
        except FileNotFoundError:
            raise ConfigError(source, None, "file not found") from None
        except OSError as exc:
            raise ConfigError(source, None, f"cannot read: {exc.strerror}") from None
        try:
            loaded = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            raise ConfigError(source, None, f"invalid YAML{where}: {getattr(exc, 'problem', exc)}") from None
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(source, None, f"top level must be a mapping, got {type(loaded).__name__}")
        base = p.resolve().parent
        for key in ("deployments", "keystore", "data_dir", "spec", "dataset_path", "report_path"):
            v = loaded.get(key)
            if isinstance(v, str) and v and not Path(v).expanduser().is_absolute():
                loaded[key] = str(base / v)
            elif isinstance(v, str):
                loaded[key] = str(Path(v).expanduser())
        data = loaded
    token = _yaml_data.set(data)
    try:
        config = cls(**overrides)
        config._env_overrides = env_overrides(data, cls)
        return config
    except ValidationError as exc:
        e = exc.errors()[0]
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = f"unknown field (known: {', '.join(_known_fields(cls, tuple(e['loc'])[:-1]))})"
        more = f" (and {len(exc.errors()) - 1} more problem(s))" if len(exc.errors()) > 1 else ""
        raise ConfigError(source, _field_path(tuple(e["loc"])), msg + more) from None
    finally:
        _yaml_data.reset(token)
