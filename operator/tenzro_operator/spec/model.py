"""The task spec's pydantic models: the fields of the Tenzro Train task JSON and their checks
(the shape and the protocol fields: the package docstring)."""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal, Union

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tenzro_operator.did import check_did
from tenzro_operator.errors import SpecError
from tenzro_operator.spec.task_id import HEX32_RE, task_id_bytes32

ADDRESS_RE = re.compile(r"^0x[0-9a-fA-F]{40}$")
UINT_RE = re.compile(r"^[0-9]+$")
UINT256_MAX = 2**256 - 1
MAX_SYNCER_FEE_BPS = 2_000  # TrainingRegistry.MAX_SYNCER_FEE_BPS
MAX_ENROLLMENT_MS = 30 * 24 * 3600 * 1000  # TrainingRegistry.MAX_ENROLLMENT_SECONDS (30 days), in ms
MAX_SUBMISSION_SLOTS = 2048  # TrainingRegistry.MAX_SUBMISSION_SLOTS: largest M * F
DEFAULT_ENROLLMENT_WINDOW_MS = 3_600_000  # one hour
DEFAULT_SYNCER_FEE_BPS = 100  # 1 % of the pool
DEFAULT_SYNCER_BOND = str(10 * 10**18)  # 10 TNZO in atto-units
MAX_CHALLENGE_MS = 7 * 24 * 3600 * 1000  # TrainingRegistry.MAX_CHALLENGE_SECONDS (7 days), in ms
DEFAULT_CHALLENGE_WINDOW_MS = 60_000  # one minute

AGGREGATION_RULES = ("Mean", "TrimmedMean", "CoordinateMedian", "Krum")
"""Names of the aggregation rules, in the order of the contract's enum (0..3)."""


COMPRESSION_NAMES: dict[str, dict[str, Any]] = {
    "none": {"kind": "none"},
    "mx_int8": {"kind": "mx", "element": "int8"},
    "mx_fp8": {"kind": "mx", "element": "fp8_e4m3"},
    "mx_fp8_e4m3": {"kind": "mx", "element": "fp8_e4m3"},
    "mx_fp8_e5m2": {"kind": "mx", "element": "fp8_e5m2"},
    "mx_fp6_e3m2": {"kind": "mx", "element": "fp6_e3m2"},
    "mx_fp6_e2m3": {"kind": "mx", "element": "fp6_e2m3"},
    "mx_fp4": {"kind": "mx", "element": "fp4_e2m1"},
    "topk": {"kind": "topk"},
}
"""Short names of ``metadata.protocol.compression`` -> the codec object they stand for (MX block
scaling, 32 values per E8M0 scale, no error feedback; ``topk``: top 64 of every 4096 values, 2-bit
values, error feedback; `tenzro_trainer.compression.config`)."""

DEFAULT_COMPRESSION = "mx_fp4"
"""The codec a new spec gets unless its sponsor chooses another (``tenzro train new-spec``, ``make
demo``): MXFP4, 7.4x fewer bytes than dense float32 payloads (175x fewer than synchronous
data-parallel) at a held-out loss 0.983 +- 0.021 and a training-window loss 1.009 +- 0.004 of
uncompressed DiLoCo's (``trainer/benchmarks/results/compression.md``, 3 seeds, 30 rounds), without
state on the trainer. Top-k sends fewer bytes still, but only with another outer optimizer and it
underfits at this scale (same file)."""


def resolve_codec(value: Any):
    """The codec of ``metadata.protocol.compression``: None -> `NoCompression` (dense float32
    payloads), a name of `COMPRESSION_NAMES`, or a codec object as
    `tenzro_trainer.compression.parse_codec` takes it (a dict with ``kind``).

    Returns:
        ``NoCompression | MXCodec | TopKCodec`` (frozen pydantic models).
    Raises:
        ValueError: an unknown name, a value of another type, or an invalid codec object (the
            message names the offending key).
    """
    from tenzro_trainer.compression import parse_codec

    if isinstance(value, str):
        if value not in COMPRESSION_NAMES:
            raise ValueError(f"unknown compression {value!r}; a name is one of {', '.join(COMPRESSION_NAMES)}, "
                             "or write a codec object such as {\"kind\": \"mx\", \"element\": \"fp4_e2m1\"}")
        value = COMPRESSION_NAMES[value]
    elif value is not None and not isinstance(value, dict):
        raise ValueError(f"compression must be a codec name or a codec object, got {type(value).__name__} {value!r}")
    try:
        return parse_codec(value)
    except ValueError as exc:  # tenzro_trainer's ConfigError: pydantic's problems, with their keys
        raise ValueError(str(exc)) from None


def _known_families() -> tuple[str, ...]:
    """Model families the reference trainer knows (``tenzro_trainer.config.FAMILIES``)."""
    try:
        from tenzro_trainer.config import FAMILIES
    except ImportError:  # the trainer package is optional for pure spec handling
        return ("timesfm", "ttm")
    return tuple(FAMILIES)


def _check_hex32(value: str, what: str) -> str:
    if not isinstance(value, str) or not HEX32_RE.match(value):
        raise ValueError(f"{what} must be 0x followed by 64 hex digits (32 bytes), got {value!r}")
    return value


def _check_atto(value: Any, what: str) -> str:
    """A decimal string of atto-units (18 decimals) that fits a uint256."""
    if not isinstance(value, str) or not UINT_RE.match(value):
        hint = " (write it as a JSON string: numbers lose precision past 2**53)" if isinstance(value, int) else ""
        raise ValueError(f"{what} must be a decimal integer string of atto-units (18 decimals), "
                         f"got {value!r}{hint}")
    if int(value) > UINT256_MAX:
        raise ValueError(f"{what} does not fit a uint256")
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)


class TrimmedMeanParams(_Strict):
    alpha_bps: int = Field(ge=0, lt=5000, description="fraction trimmed at each end, basis points (< 5000)")


class TrimmedMeanRule(_Strict):
    """``{"TrimmedMean": {"alpha_bps": N}}``."""

    TrimmedMean: TrimmedMeanParams


class KrumParams(_Strict):
    f: int = Field(ge=0, description="number of Byzantine submissions tolerated")


class KrumRule(_Strict):
    """``{"Krum": {"f": N}}``."""

    Krum: KrumParams


Aggregation = Union[Literal["Mean", "CoordinateMedian"], TrimmedMeanRule, KrumRule]


class Architecture(_Strict):
    """``architecture``: the model family and its size; ``metadata`` shapes the model
    (see ``tenzro_trainer.config.ModelConfig.from_metadata``)."""

    family: str
    param_count: int = Field(gt=0, description="total parameters of the model")
    modality: str
    fragment_count: int = Field(ge=1, le=65535, description="F, number of fragments")
    dtype: Literal["bf16", "fp16", "fp32"]
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("family")
    @classmethod
    def _family_known(cls, v: str) -> str:
        known = _known_families()
        if v not in known:
            raise ValueError(f"unknown architecture family {v!r}; known: {', '.join(known)}")
        return v

    @field_validator("modality")
    @classmethod
    def _modality(cls, v: str) -> str:
        if v != "Timeseries":
            raise ValueError(f"modality {v!r} is not supported; only 'Timeseries' is")
        return v


class InitialWeight(_Strict):
    """Round 0's global weights of one fragment: IPFS CID and sha256 of the safetensors bytes."""

    cid: str = Field(min_length=1)
    sha256: str

    @field_validator("sha256")
    @classmethod
    def _hex(cls, v: str) -> str:
        return _check_hex32(v, "sha256")

    @property
    def sha256_bytes(self) -> bytes:
        return bytes.fromhex(self.sha256[2:])


class CreditParams(_Strict):
    """``metadata.protocol.credit``: credit for work only (issue #26): the syncer credits and
    aggregates an off-chain payload only when the run's `tenzro_trainer.credit.CreditGate` does
    (`tenzro_operator.roles.syncer_credit`). Absent keys take `CreditConfig`'s defaults, the ones
    measured in trainer/benchmarks/results/attacks.md."""

    copy_cosine: float = Field(default=0.95, gt=0, le=1, description="|cosine| above which two payloads (or one "
                                                                      "and the last aggregate) are copies")
    replay_cosine: float = Field(default=0.99, gt=0, le=1, description="|cosine| to one of the trainer's own "
                                                                        "earlier payloads above which it is a replay")
    norm_multiple: float = Field(default=3.0, gt=0, allow_inf_nan=False,
                                 description="a payload's L2 norm at most this multiple of the round's median")
    harm: float = Field(default=2.0, ge=0, allow_inf_nan=False,
                        description="the loss raised on data not assigned at most this multiple of the own gain")
    ema: float = Field(default=0.1, gt=0, le=1, description="weight of the new round in the moving average of passes")
    start: float = Field(default=0.6, ge=0, le=1, description="the moving average before a trainer's first payload")
    credit_above: float = Field(default=0.6, ge=0, lt=1, description="credited while the moving average is above this")

    def config(self):
        """The `CreditConfig` of these thresholds, without clipping or the replay audit (neither is
        part of a root-flow round yet)."""
        from tenzro_trainer.credit import CreditConfig

        return CreditConfig(**self.model_dump(), clip=False, audit=0)


class ProtocolParams(_Strict):
    """``metadata.protocol``: the fields the registry enforces beyond the docs' spec."""

    min_stake: str
    max_missed_rounds: int | None = Field(
        default=None, description="protocol v1's eviction threshold; ignored (accepted so older specs still parse)")
    fragment_sizes: list[Annotated[int, Field(gt=0)]]
    initial_weights: list[InitialWeight]
    norm_multiple: float = Field(gt=0)
    shards: int = Field(ge=1)
    seed: int = Field(ge=0)
    flow: Literal["root"] = Field(
        default="root", description="how rounds are settled (contracts/PROTOCOL.md §5): 'root' = submissions "
                                    "off-chain, one commitRound per round, fraud proofs, Merkle claims (the one flow; "
                                    "protocol v1's per-submission flow was removed)")
    score_min: float | None = Field(
        default=None, allow_inf_nan=False,
        description="the syncer leaves out an off-chain payload whose loss-improvement score "
                    "(tenzro_trainer.scoring, on the round's fixed batch of training windows) is at or below this; "
                    "None = no scoring")

    credit: CreditParams | None = Field(
        default=None, description="credit for work only (CreditParams): the syncer credits an off-chain payload only "
                                  "when the run's credit gate does; None = every valid, screened, scored payload")
    overlap_steps: int = Field(
        default=0, ge=0,
        description="overlap (the one-step-delayed outer update of Streaming DiLoCo): a trainer runs up to this "
                    "many of round r+1's inner steps from its own weights while round r is settled, then rebases "
                    "them on round r's committed weights (tenzro_trainer.inner.InnerTrainer.rebase); 0 = wait for "
                    "the weights; at most inner_steps")
    compression: str | dict[str, Any] | None = Field(
        default=None,
        description="codec of the trainers' pseudo-gradient payloads (resolve_codec): a name of COMPRESSION_NAMES "
                    "or a codec object of tenzro_trainer.compression; None = dense float32 payloads")

    @field_validator("compression", mode="before")
    @classmethod
    def _codec_valid(cls, v: Any) -> Any:
        resolve_codec(v)
        return v

    @property
    def codec(self):
        """The payload codec (`resolve_codec`): ``NoCompression`` when ``compression`` is absent."""
        return resolve_codec(self.compression)

    @field_validator("flow", mode="before")
    @classmethod
    def _one_flow(cls, v: Any) -> Any:
        if v == "v1":
            raise ValueError("the v1 flow (one transaction per submission, finalizeRound) was removed in protocol v3: "
                             "every run is settled by root (contracts/PROTOCOL.md §5); drop the field or set flow: root")
        return v

    @field_validator("min_stake", mode="before")
    @classmethod
    def _stake(cls, v: Any) -> str:
        return _check_atto(v, "min_stake")

    @field_validator("norm_multiple")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("norm_multiple must be finite")
        return v

    @property
    def norm_screen_sq_bits(self) -> int:
        """The registry's ``normScreenSq``: the binary32 bit pattern of float32(norm_multiple ** 2),
        the factor a sum of squares is compared with (PROTOCOL.md §4)."""
        return int(np.array([self.norm_multiple ** 2], dtype=np.float32).view(np.uint32)[0])

    @property
    def min_stake_atto(self) -> int:
        """Minimum stake in token atto-units."""
        return int(self.min_stake)


class OuterParams(_Strict):
    """``metadata.outer``: the task's outer optimizer, SGD on the aggregated outer gradient.

    Absent keys take DiLoCo's values (Douillard et al. 2023, Sec. 2: lr 0.7, Nesterov momentum 0.9).
    Checked when the spec is parsed, so a task whose syncer could not build its optimizer is never
    posted (unknown keys are errors too: a misspelt ``learning_rate`` would silently be ignored).
    """

    lr: float = Field(default=0.7, gt=0, allow_inf_nan=False, description="outer learning rate")
    momentum: float = Field(default=0.9, ge=0, lt=1, description="momentum coefficient in [0, 1)")
    nesterov: bool = True

    @model_validator(mode="after")
    def _nesterov_needs_momentum(self) -> "OuterParams":
        if self.nesterov and self.momentum == 0:
            raise ValueError("@momentum: Nesterov needs momentum > 0; set nesterov to false for plain SGD")
        return self


# metadata sections with a schema of their own: key -> model
_METADATA_MODELS: dict[str, type[_Strict]] = {"protocol": ProtocolParams, "outer": OuterParams}


class TaskSpec(_Strict):
    """The task spec of the Tenzro Train docs, validated.

    Amounts are decimal strings of token atto-units in the JSON; the ``*_atto``
    properties give them as ``int``. ``grace_window_ms`` is milliseconds.
    """

    task_id: str = Field(min_length=1, max_length=256)
    sponsor_did: str
    sponsor_address: str
    architecture: Architecture
    tier: Literal["Open", "Verified", "Confidential"]
    aggregation: Aggregation
    trainer_count: int = Field(ge=1, le=65535, description="M")
    quorum: int = Field(ge=1, le=65535, description="K, accepted submissions per fragment")
    inner_steps: int = Field(ge=1, le=2**32 - 1, description="H")
    max_rounds: int = Field(ge=1, le=2**32 - 1)
    grace_window_ms: int = Field(gt=0, le=2**64 - 1, description="tau, milliseconds")
    reward_pool: str
    dataset_ref: str
    dataset_hash: str
    min_throughput: int | float | None = None
    created_at: int = Field(ge=0, description="unix seconds")
    metadata: dict[str, Any] = Field(default_factory=dict)
    enrollment_window_ms: int = Field(default=DEFAULT_ENROLLMENT_WINDOW_MS, gt=0, le=MAX_ENROLLMENT_MS,
                                      description="enrollment window after posting, milliseconds (<= 30 days)")
    syncer_fee_bps: int = Field(default=DEFAULT_SYNCER_FEE_BPS, ge=0, le=MAX_SYNCER_FEE_BPS,
                                description="syncers' share of the reward pool, basis points")
    syncer_bond: str = Field(default=DEFAULT_SYNCER_BOND, description="bond the elected syncer locks, atto-units")
    challenge_window_ms: int = Field(default=DEFAULT_CHALLENGE_WINDOW_MS, gt=0, le=MAX_CHALLENGE_MS,
                                     description="answer window of an availability challenge, milliseconds")
    enrollment_allowlist: list[str] | None = Field(
        default=None, min_length=1, max_length=65535,
        description="addresses allowed to enroll (the registry's tier 1, Allowlist: nobody else can, so sybils "
                    "cannot fill the run); unset: anyone with the minimum stake (tier 0, Open)")

    @field_validator("sponsor_did")
    @classmethod
    def _did(cls, v: str) -> str:
        try:
            return check_did(v)
        except ValueError as exc:
            raise ValueError(f"sponsor_did must be a DID: {exc}") from None

    @field_validator("sponsor_address")
    @classmethod
    def _address(cls, v: str) -> str:
        if not isinstance(v, str) or not ADDRESS_RE.match(v):
            raise ValueError(f"sponsor_address must be 0x followed by 40 hex digits, got {v!r}")
        return v

    @field_validator("enrollment_allowlist")
    @classmethod
    def _allowlist(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return v
        bad = [a for a in v if not isinstance(a, str) or not ADDRESS_RE.match(a)]
        if bad:
            raise ValueError(f"enrollment_allowlist entries must be 0x followed by 40 hex digits, got {bad[:3]!r}")
        if len({a.lower() for a in v}) != len(v):
            raise ValueError("enrollment_allowlist lists an address twice")
        return v

    @property
    def registry_tier(self) -> int:
        """The registry's tier code: 1 (Allowlist) with an ``enrollment_allowlist``, else 0 (Open)."""
        return 1 if self.enrollment_allowlist else 0

    @field_validator("tier")
    @classmethod
    def _tier(cls, v: str) -> str:
        if v != "Open":
            raise ValueError(f"tier {v!r} is not accepted by the registry yet; only 'Open' is")
        return v

    @field_validator("aggregation", mode="before")
    @classmethod
    def _rule_name(cls, v: Any) -> Any:
        forms = "'Mean', 'CoordinateMedian', {'TrimmedMean': {'alpha_bps': N}} or {'Krum': {'f': N}}"
        if isinstance(v, str) and v not in ("Mean", "CoordinateMedian"):
            raise ValueError(f"unknown aggregation rule {v!r}; expected {forms}")
        if isinstance(v, dict) and (len(v) != 1 or next(iter(v)) not in ("TrimmedMean", "Krum")):
            raise ValueError(f"unknown aggregation rule {v!r}; expected {forms}")
        if not isinstance(v, (str, dict)):
            raise ValueError(f"aggregation must be a string or an object, got {v!r}; expected {forms}")
        return v

    @field_validator("reward_pool", mode="before")
    @classmethod
    def _pool(cls, v: Any) -> str:
        _check_atto(v, "reward_pool")
        if int(v) == 0:
            raise ValueError("reward_pool must be positive")
        return v

    @field_validator("syncer_bond", mode="before")
    @classmethod
    def _bond(cls, v: Any) -> str:
        _check_atto(v, "syncer_bond")
        if int(v) == 0:
            raise ValueError("syncer_bond must be positive (the registry reverts Registry__ZeroSyncerBond)")
        return v

    @field_validator("dataset_ref")
    @classmethod
    def _ref(cls, v: str) -> str:
        if not v.startswith("ipfs://") or len(v) <= len("ipfs://"):
            raise ValueError(f"dataset_ref must be an ipfs:// URI, got {v!r}")
        return v

    @field_validator("dataset_hash")
    @classmethod
    def _dhash(cls, v: str) -> str:
        return _check_hex32(v, "dataset_hash")

    @field_validator("metadata")
    @classmethod
    def _metadata_sections(cls, v: dict[str, Any]) -> dict[str, Any]:
        for key, model in _METADATA_MODELS.items():
            if key in v:
                model.model_validate(v[key])  # errors carry the path via parse_spec
        return v

    @model_validator(mode="after")
    def _consistency(self) -> "TaskSpec":
        if self.quorum > self.trainer_count:
            raise ValueError(f"@quorum: quorum K ({self.quorum}) exceeds trainer_count M ({self.trainer_count})")
        slots = self.trainer_count * self.architecture.fragment_count
        if slots > MAX_SUBMISSION_SLOTS:
            raise ValueError(f"@trainer_count: trainer_count M x architecture.fragment_count F = {slots} exceeds "
                             f"{MAX_SUBMISSION_SLOTS}, the registry's bound on the submissions of a round")
        if isinstance(self.aggregation, KrumRule) and self.tier == "Open":
            raise ValueError("@aggregation: Krum cannot be posted in the Open tier: it ranks whole payloads by "
                             "distances, so no single coordinate can prove a commit wrong (the registry reverts "
                             "Registry__RuleNotProvable); use Mean, TrimmedMean or CoordinateMedian")
        if isinstance(self.aggregation, KrumRule):
            f = self.aggregation.Krum.f
            if self.quorum < 2 * f + 3:
                raise ValueError(f"@aggregation.Krum.f: Krum with f={f} needs quorum >= 2f+3 = {2 * f + 3}, got {self.quorum}")
        p = self.protocol
        if p is not None:
            fc = self.architecture.fragment_count
            if len(p.fragment_sizes) != fc:
                raise ValueError(f"@metadata.protocol.fragment_sizes: metadata.protocol.fragment_sizes has {len(p.fragment_sizes)} entries, "
                                 f"architecture.fragment_count is {fc}")
            if len(p.initial_weights) != fc:
                raise ValueError(f"@metadata.protocol.initial_weights: metadata.protocol.initial_weights has {len(p.initial_weights)} entries, "
                                 f"architecture.fragment_count is {fc}")
            if p.overlap_steps > self.inner_steps:
                raise ValueError(f"@metadata.protocol.overlap_steps: overlap_steps ({p.overlap_steps}) exceeds "
                                 f"inner_steps H ({self.inner_steps})")
            if sum(p.fragment_sizes) != self.architecture.param_count:
                raise ValueError(f"@metadata.protocol.fragment_sizes: metadata.protocol.fragment_sizes sum to {sum(p.fragment_sizes)}, "
                                 f"architecture.param_count is {self.architecture.param_count}")
        return self

    # -- derived values ------------------------------------------------------------------

    @property
    def protocol(self) -> ProtocolParams | None:
        """``metadata.protocol`` parsed, or None when the spec has none."""
        raw = self.metadata.get("protocol")
        return None if raw is None else ProtocolParams.model_validate(raw)

    @property
    def outer(self) -> OuterParams:
        """``metadata.outer`` parsed; DiLoCo's defaults when the spec has none."""
        return OuterParams.model_validate(self.metadata.get("outer") or {})

    def require_protocol(self) -> ProtocolParams:
        """``metadata.protocol``; raises `SpecError` when absent (posting needs it)."""
        p = self.protocol
        if p is None:
            raise SpecError("metadata.protocol", "missing; posting a task needs min_stake, "
                            "fragment_sizes, initial_weights, norm_multiple, shards and seed")
        return p

    @property
    def reward_pool_atto(self) -> int:
        """Reward pool in token atto-units."""
        return int(self.reward_pool)

    @property
    def syncer_bond_atto(self) -> int:
        """The syncer's bond in token atto-units."""
        return int(self.syncer_bond)

    @property
    def challenge_seconds(self) -> int:
        """The challenge answer window as the registry stores it: ceil(ms / 1000) seconds."""
        return -(-self.challenge_window_ms // 1000)

    @property
    def enrollment_seconds(self) -> int:
        """The enrollment window as the registry stores it: ceil(ms / 1000) seconds."""
        return -(-self.enrollment_window_ms // 1000)

    @property
    def syncer_fee_per_round_atto(self) -> int:
        """What each finalized round pays its syncer, atto-units (the registry's integer division:
        ``reward_pool * syncer_fee_bps // 10000 // max_rounds``)."""
        return self.reward_pool_atto * self.syncer_fee_bps // 10_000 // self.max_rounds

    @property
    def task_id_bytes(self) -> bytes:
        """The on-chain ``bytes32`` task id (see `task_id_bytes32`)."""
        return task_id_bytes32(self.task_id)

    @property
    def dataset_hash_bytes(self) -> bytes:
        return bytes.fromhex(self.dataset_hash[2:])

    @property
    def aggregation_name(self) -> str:
        """``"Mean" | "TrimmedMean" | "CoordinateMedian" | "Krum"``."""
        a = self.aggregation
        if isinstance(a, str):
            return a
        return "TrimmedMean" if isinstance(a, TrimmedMeanRule) else "Krum"

    @property
    def aggregation_params(self) -> dict[str, int]:
        """The rule's parameters (``{"alpha_bps": ..}``, ``{"f": ..}`` or ``{}``)."""
        a = self.aggregation
        if isinstance(a, TrimmedMeanRule):
            return {"alpha_bps": a.TrimmedMean.alpha_bps}
        if isinstance(a, KrumRule):
            return {"f": a.Krum.f}
        return {}

    @property
    def aggregation_rule_id(self) -> int:
        """Index of the rule in `AGGREGATION_RULES` (the contract's enum value)."""
        return AGGREGATION_RULES.index(self.aggregation_name)

    @property
    def aggregation_param(self) -> int:
        """The rule's single integer parameter as the contract stores it (alpha_bps, f, or 0)."""
        return next(iter(self.aggregation_params.values()), 0)

    def to_json_obj(self) -> dict[str, Any]:
        """The spec as plain JSON values (the shape of the docs). An unset ``enrollment_allowlist``
        is left out, so an Open spec's canonical bytes (and ``spec_hash``) are what they were
        before the field existed."""
        obj = self.model_dump(mode="json")
        if obj.get("enrollment_allowlist") is None:
            obj.pop("enrollment_allowlist", None)
        return obj
