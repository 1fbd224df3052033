"""Sponsor: build a task spec from a dataset and a model, pin its assets, escrow and post it.

Usage::

    spec = build_spec(ipfs, SpecDraft(task_id="demo-1", sponsor_address=addr, ...), df)
    task_id, spec_cid = post_task(client, ipfs, spec)      # permit + postTask in one transaction
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field

import pandas as pd

from tenzro_operator.chain import ChainClient
from tenzro_operator.errors import SpecError
from tenzro_operator.ipfs import IpfsClient
from tenzro_operator.spec import (
    DEFAULT_CHALLENGE_WINDOW_MS,
    DEFAULT_ENROLLMENT_WINDOW_MS,
    DEFAULT_SYNCER_BOND,
    DEFAULT_SYNCER_FEE_BPS,
    TaskSpec,
    canonical_json,
    parse_spec,
    resolve_codec,
    task_id_bytes32,
)
from tenzro_operator.root_flow import initial_fragments_root, outer_rule
from tenzro_operator.task_assets import initial_weights, pin_dataset
from tenzro_operator.task_runtime import INITIAL_ROUND, TaskRuntime
from tenzro_trainer.config import ROBUST_DEFAULTS, ModelConfig

TOKEN = 10**18  # atto-units per TNZO


@dataclass
class SpecDraft:
    """What a sponsor chooses; `build_spec` fills in the dataset, fragment sizes and initial weights.

    Amounts are token atto-units; `grace_window_ms`, `enrollment_window_ms` and
    `challenge_window_ms` milliseconds.
    Defaults are the Phase-1 reference hyperparameters of DESIGN.md except the model (the `demo`
    preset); the protocol-v2 fields default as in `tenzro_operator.spec` (one hour of enrollment,
    1 % of the pool to the syncers, a 10 TNZO syncer bond).
    """

    task_id: str
    sponsor_address: str
    sponsor_did: str = "did:tenzro:human:sponsor"
    family: str = "timesfm"
    model_metadata: dict = field(default_factory=lambda: {"preset": "demo"})
    fragment_count: int = 12
    trainer_count: int = 8
    quorum: int = 6
    inner_steps: int = 24
    max_rounds: int = 5
    grace_window_ms: int = 30_000
    enrollment_window_ms: int = DEFAULT_ENROLLMENT_WINDOW_MS
    syncer_fee_bps: int = DEFAULT_SYNCER_FEE_BPS
    syncer_bond: int = int(DEFAULT_SYNCER_BOND)
    challenge_window_ms: int = DEFAULT_CHALLENGE_WINDOW_MS
    aggregation: str | dict = "Mean"
    reward_pool: int = 1_000 * TOKEN
    min_stake: int = 100 * TOKEN
    norm_multiple: float = 10.0
    shards: int | None = None  # default: one shard per trainer
    seed: int = 0
    score_min: float | None = None  # loss-improvement scoring threshold (None = off)
    credit: dict | None = None  # credit for work only: the credit gate's thresholds ({} = its defaults; None = off)
    compression: str | dict | None = None  # payload codec: a name ("mx_fp4", "topk") or codec object; None = dense
    overlap_steps: int = 0  # inner steps a trainer may run before the previous round's weights arrive
    enrollment_allowlist: tuple[str, ...] = ()  # only these addresses may enroll (tier 1); empty: Open
    metadata: dict = field(default_factory=dict)


def robust_aggregation(defaults: dict = ROBUST_DEFAULTS) -> str | dict:
    """The spec's ``aggregation`` for the rule of `tenzro_trainer.config.ROBUST_DEFAULTS` (serde's
    external tagging: ``{"TrimmedMean": {"alpha_bps": 2500}}``, or the bare name of a rule without
    parameters): the default defence of a new spec, with its norm screen and scoring."""
    params = dict(defaults["rule_params"])
    return {defaults["rule"]: params} if params else defaults["rule"]


def default_score_min(scoring: bool = ROBUST_DEFAULTS["scoring"]) -> float | None:
    """The spec's ``score_min`` when the sponsor chose none: 0 (leave out any payload that makes the
    loss on its trainer's shard worse) with scoring on; None without."""
    return 0.0 if scoring else None


def build_spec(ipfs: IpfsClient, d: SpecDraft, df: pd.DataFrame) -> TaskSpec:
    """Check the draft, pin the dataset and the initial weights, and return the validated spec (a
    draft the spec refuses pins nothing). A draft's
    ``compression`` is written out as the full codec object (every field, `resolve_codec`), so the
    pinned spec does not depend on the short names; a codec of kind ``none`` leaves the key out.

    Raises:
        SpecError: an inconsistent draft (K > M, unknown family, ...), with the field named.
        IpfsError: the IPFS node is unavailable.
    """
    cfg = ModelConfig.from_metadata(d.family, d.model_metadata)
    runtime = TaskRuntime.from_model_config("0x" + task_id_bytes32(d.task_id).hex(), cfg, d.fragment_count)
    try:
        codec = resolve_codec(d.compression)
    except ValueError as exc:
        raise SpecError("metadata.protocol.compression", str(exc), source=f"draft {d.task_id}") from None
    compression = {} if codec.kind == "none" else {"compression": codec.model_dump(mode="json")}

    def spec(dataset_ref: str, dhash: str, initial: list[dict]) -> TaskSpec:
        return parse_spec({
            "task_id": d.task_id,
            "sponsor_did": d.sponsor_did,
            "sponsor_address": d.sponsor_address,
            "architecture": {"family": d.family, "param_count": sum(runtime.sizes), "modality": "Timeseries",
                             "fragment_count": d.fragment_count, "dtype": "fp32", "metadata": dict(d.model_metadata)},
            "tier": "Open",
            "aggregation": d.aggregation,
            "trainer_count": d.trainer_count,
            "quorum": d.quorum,
            "inner_steps": d.inner_steps,
            "max_rounds": d.max_rounds,
            "grace_window_ms": d.grace_window_ms,
            "enrollment_window_ms": d.enrollment_window_ms,
            "reward_pool": str(d.reward_pool),
            "syncer_fee_bps": d.syncer_fee_bps,
            "syncer_bond": str(d.syncer_bond),
            "challenge_window_ms": d.challenge_window_ms,
            **({"enrollment_allowlist": list(d.enrollment_allowlist)} if d.enrollment_allowlist else {}),
            "dataset_ref": dataset_ref,
            "dataset_hash": dhash,
            "min_throughput": None,
            "created_at": int(time.time()),
            "metadata": {**d.metadata, "protocol": {
                "min_stake": str(d.min_stake),
                "fragment_sizes": runtime.sizes, "initial_weights": initial, "norm_multiple": d.norm_multiple,
                "shards": d.shards or d.trainer_count, "seed": d.seed,
                **({"score_min": d.score_min} if d.score_min is not None else {}),
                **({"credit": d.credit} if d.credit is not None else {}),
                **({"overlap_steps": d.overlap_steps} if d.overlap_steps else {}), **compression}},
        }, source=f"draft {d.task_id}")

    # the draft's own checks (K > M, windows, fees, ...) before anything is pinned
    unpinned = "0x" + "00" * 32
    spec("ipfs://unpinned", unpinned, [{"cid": "unpinned", "sha256": unpinned}] * len(runtime.sizes))
    dataset_ref, dhash = pin_dataset(ipfs, df)
    blobs = runtime.encode_weights(runtime.initial_state(d.seed), INITIAL_ROUND)
    initial = [{"cid": ipfs.add(b), "sha256": "0x" + hashlib.sha256(b).hexdigest()} for b in blobs]
    return spec(dataset_ref, dhash, initial)


def enable_root_flow(client: ChainClient, ipfs, spec) -> None:
    """``useRootFlow`` for a just-posted spec (the sponsor, before anyone enrolls; trainers
    enroll only once the run is in the root flow): the initial fragments root and the outer rule.

    Raises:
        ChainRevert: ``Registry__OuterRuleNotProvable`` (Krum, a trim of half or more),
            ``Registry__WrongStatus`` / ``Registry__NotSponsor`` / someone enrolled already.
    """
    runtime = TaskRuntime.from_spec(spec)
    run = client.get_run(spec.task_id_bytes)
    state, _ = initial_weights(ipfs, spec, runtime, run.initial_weights_root)
    client.use_root_flow(spec.task_id_bytes, initial_fragments_root(state, runtime.fragments), outer_rule(spec))


def post_task(client: ChainClient, ipfs: IpfsClient, spec: TaskSpec) -> tuple[bytes, str]:
    """Pin the canonical spec JSON and post the task, escrowing the reward pool (an ERC-2612 permit
    in the same transaction; approve first for a token without permits; a spec's
    ``enrollment_allowlist`` allowed next, `ChainClient.post_task`), then put in the root flow
    (`enable_root_flow`: the initial fragments root and the outer rule).

    Returns (task id bytes32, spec CID). Raises `ChainRevert` (e.g. Registry__TaskExists) with the
    error's name, or `RpcUnavailable` / `IpfsError` when a service is down.
    """
    spec_cid = ipfs.add(canonical_json(spec))
    client.post_task(spec, spec_cid)
    enable_root_flow(client, ipfs, spec)
    return spec.task_id_bytes, spec_cid
