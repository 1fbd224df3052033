"""The task spec: pydantic models of the Tenzro Train task JSON (`model`), reading and validating it
(`parsing`), its canonical bytes and hash, and task ids (`task_id`).

The shape is the one of the Tenzro Train docs::

    {"task_id": "...", "sponsor_did": "did:...", "sponsor_address": "0x...",
     "architecture": {"family": "timesfm", "param_count": 200000000, "modality": "Timeseries",
                      "fragment_count": 12, "dtype": "bf16", "metadata": {...}},
     "tier": "Open", "aggregation": "Mean", "trainer_count": 8, "quorum": 6, "inner_steps": 24,
     "max_rounds": 1024, "grace_window_ms": 30000, "reward_pool": "1000...000",
     "dataset_ref": "ipfs://...", "dataset_hash": "0x...", "min_throughput": null,
     "created_at": 1761350400, "metadata": {...}}

``aggregation`` uses serde's external tagging: ``"Mean"``, ``"CoordinateMedian"``,
``{"TrimmedMean": {"alpha_bps": 1250}}`` or ``{"Krum": {"f": 1}}``. Krum is refused in the
Open tier (the only tier the registry takes): it ranks whole payloads by distances, so no single
coordinate can prove a commit wrong (contracts/PROTOCOL.md §1; the registry reverts
``Registry__RuleNotProvable``).

Top-level fields of protocol v2 beyond the docs' example (optional; a spec without them takes
the defaults, and the canonical JSON, hence the spec hash, always carries them):

========================  =======================================================  ===========
``enrollment_window_ms``  enrollment stays open this long after posting (ms, > 0,  3_600_000
                          <= 30 days; on-chain ceil(ms / 1000) seconds); after it
                          anyone opens round 0 with >= K enrolled or cancels with
                          fewer
``syncer_fee_bps``        share of the reward pool paid to the syncers, basis      100
                          points (0..2000), ``reward_pool * bps / 10000 /
                          max_rounds`` per finalized round
``syncer_bond``           stake the elected syncer locks for the run, decimal      10 TNZO
                          string of atto-units (> 0); burned if it is replaced
``challenge_window_ms``   how long a trainer has to answer an availability         60_000
                          challenge (ms, > 0, <= 7 days; on-chain ceil(ms / 1000)
                          seconds, contracts/PROTOCOL.md §4)
========================  =======================================================  ===========

Protocol fields the contract enforces but the docs' spec has no slot for live in
``metadata.protocol`` (all optional in the docs' example, required by ``post-task``):

=====================  ==========================================================
``min_stake``          minimum trainer stake, decimal string of token atto-units
``max_missed_rounds``  protocol v1's eviction threshold: accepted in old specs and ignored
                       (nobody is evicted since protocol v3; the registry has no such field)
``fragment_sizes``     parameters per fragment, F ints (sum = architecture.param_count)
``initial_weights``    F objects ``{"cid": "...", "sha256": "0x<64 hex>"}``: round 0's
                       global weights, sha256 of the exact safetensors bytes
``norm_multiple``      the syncer rejects a payload whose L2 norm exceeds this multiple
                       of the median norm (float > 0)
``shards``             number of data shards of the dataset (int >= 1)
``seed``               seed of the run (data sampling, initial weights), int >= 0
``compression``        optional: the codec of the trainers' pseudo-gradient payloads, a
                       codec object of `tenzro_trainer.compression` (``{"kind": "mx",
                       "element": "fp4_e2m1"}``, ``{"kind": "topk", "k": 64, "chunk":
                       4096, "bits": 2}``, ...) or a name of `COMPRESSION_NAMES`
                       (``"mx_fp4"``, ``"topk"``); absent / null: dense float32 payloads
=====================  ==========================================================

Canonical bytes: ``json.dumps(sorted keys, separators (",", ":"), UTF-8, no NaN)`` of the
validated spec; ``spec_hash = sha256(canonical bytes)`` is the ``bytes32`` stored on-chain
and the spec is pinned to IPFS as exactly those bytes.
"""

from __future__ import annotations

from tenzro_operator.spec.model import (
    AGGREGATION_RULES,
    COMPRESSION_NAMES,
    DEFAULT_CHALLENGE_WINDOW_MS,
    DEFAULT_COMPRESSION,
    DEFAULT_ENROLLMENT_WINDOW_MS,
    DEFAULT_SYNCER_BOND,
    DEFAULT_SYNCER_FEE_BPS,
    MAX_SUBMISSION_SLOTS,
    Architecture,
    CreditParams,
    InitialWeight,
    KrumRule,
    ProtocolParams,
    TaskSpec,
    TrimmedMeanRule,
    resolve_codec,
)
from tenzro_operator.spec.parsing import canonical_json, load_spec, parse_spec, spec_from_bytes, spec_hash
from tenzro_operator.spec.task_id import task_id_argument, task_id_bytes32

__all__ = [
    "AGGREGATION_RULES",
    "COMPRESSION_NAMES",
    "DEFAULT_CHALLENGE_WINDOW_MS",
    "DEFAULT_COMPRESSION",
    "DEFAULT_ENROLLMENT_WINDOW_MS",
    "DEFAULT_SYNCER_BOND",
    "DEFAULT_SYNCER_FEE_BPS",
    "MAX_SUBMISSION_SLOTS",
    "Architecture",
    "CreditParams",
    "InitialWeight",
    "KrumRule",
    "ProtocolParams",
    "TaskSpec",
    "TrimmedMeanRule",
    "canonical_json",
    "load_spec",
    "parse_spec",
    "resolve_codec",
    "spec_from_bytes",
    "spec_hash",
    "task_id_argument",
    "task_id_bytes32",
]
