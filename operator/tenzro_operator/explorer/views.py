"""The explorer's pages as JSON-ready dicts: what ``/api/...`` returns and what `html` renders.

Conventions (as the CLI's ``--format json``): bytes as 0x-hex, statuses by name, amounts as
decimal strings of atto-units (exact beyond a JSON number's range), times as unix seconds with an
``*_iso`` twin (ISO-8601, UTC). Everything here only reads: view calls, ``eth_getLogs``, the
verifier's ``eth_call``, and ``cat`` on the IPFS node.

- `runs_view`: one page of runs in posting order (status, M/K/F, round, pool, syncer, name).
- `run_view`: one run: chain parameters, the spec, trainers, rounds (timing, accepted count,
  weights root, transcript CID, held-out loss when the syncer's records are given), slashes and
  challenge evidence events, every event of the run, and the receipt with the verifier's answer.
- `round_view`: one committed round with its transcript from IPFS,
  checked against the committed ``transcriptHash`` (accepted and rejected submissions per
  fragment, reasons included).

Runs, trainers and rounds are read through `tenzro_operator.views.run` (one shape).
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any

from tenzro_operator.errors import ChainError, ChainRevert, IpfsUnavailable, TenzroError

MAX_EVENTS = 1000  # events of a run returned (the newest); `events_total` says how many there are
# Events that record a penalty or a challenge. Names from later protocol versions (InvalidProven,
# AvailabilityChallenged, ...) match too, whenever the deployed ABI has them.
EVIDENCE_EVENT = re.compile(r"Slash|Evict|Burn|Challeng|Proven|Dispute|Evidence|Fraud|Invalid|Discard|Answered")
LIVE = ("ENROLLING", "TRAINING", "COMPLETED")  # statuses whose figures still change
_HEX_ID = re.compile(r"0x[0-9a-fA-F]*")


class PageNotFound(TenzroError):
    """No such run, round or page (HTTP 404)."""


class BadRequest(TenzroError):
    """A malformed task id, round number or query parameter (HTTP 400)."""


# ------------------------------------------------------------------------------ helpers


def parse_task_id(text: str) -> bytes:
    """A task id from a URL: ``0x`` + 64 hex digits as is, any other text is the spec's task_id
    name (hashed as the registry does). Hex of another length is refused, not hashed."""
    from tenzro_operator.spec import task_id_bytes32

    if not text:
        raise BadRequest("empty task id")
    if _HEX_ID.fullmatch(text) and len(text) != 66:
        raise BadRequest(f"{text!r} looks like a hex task id but has {len(text) - 2} hex digits, not 64")
    return task_id_bytes32(text)


def jsonable(v: Any) -> Any:
    """Bytes as 0x-hex, tuples as lists, enums by name, integers past 2^53 as decimal strings."""
    import enum

    if isinstance(v, (bytes, bytearray)):
        return "0x" + bytes(v).hex()
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, enum.Enum):
        return v.name
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 2**53:
        return str(v)
    return v


def iso(ts: int | None) -> str | None:
    """Unix seconds -> ``2026-11-22T17:27:26Z``; None for 0 (not set)."""
    if not ts:
        return None
    return datetime.fromtimestamp(int(ts), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _with_iso(d: dict[str, Any]) -> dict[str, Any]:
    for k in [k for k in d if k.endswith("_at") or k.endswith("deadline")]:
        d[k + "_iso"] = iso(d[k]) if isinstance(d[k], int) else None
    return d


def _get_run(chain, task_id: bytes):
    try:
        return chain.get_run(task_id)
    except ChainRevert as exc:
        if exc.error_name != "Registry__UnknownTask":
            raise
        raise PageNotFound(f"no run with task id 0x{task_id.hex()} on {chain.shown_url}") from None


def _spec(specs, run) -> tuple[Any, str | None, bool]:
    """(spec or None, why not, whether the IPFS node is down): a spec that cannot be had is a note
    on the page, not an error."""
    try:
        return specs.get(run.spec_cid, run.spec_hash), None, False
    except IpfsUnavailable as exc:
        return None, str(exc), True
    except TenzroError as exc:
        return None, f"spec ipfs://{run.spec_cid} is not usable: {exc}", False


def _flatten(obj: Any, prefix: str = "") -> list[list[str]]:
    """A spec as ``[["architecture.family", "timesfm"], ...]`` rows for a table."""
    import json

    if isinstance(obj, dict) and obj:
        rows: list[list[str]] = []
        for k in sorted(obj):
            rows += _flatten(obj[k], f"{prefix}.{k}" if prefix else str(k))
        return rows
    return [[prefix, obj if isinstance(obj, str) else json.dumps(obj, sort_keys=True)]]


# ------------------------------------------------------------------------------ runs


def runs_view(chain, specs, offset: int = 0, limit: int = 50) -> dict[str, Any]:
    """One page of runs in posting order; a run's ``name`` is its spec's task_id (None while the
    spec cannot be fetched: ``ipfs_error`` says why)."""
    ids, total = chain.list_runs(offset, limit)
    runs, ipfs_error = [], None
    for tid in ids:
        run = chain.get_run(tid)
        spec = None
        if ipfs_error is None:  # once the node is down, do not wait on it once per run
            spec, why, down = _spec(specs, run)
            ipfs_error = why if down else None
        runs.append({"task_id": "0x" + tid.hex(), "name": spec.task_id if spec else None,
                     "status": run.status.name, "trainer_count": run.trainer_count, "quorum": run.quorum,
                     "fragment_count": run.fragment_count, "enrolled_count": run.enrolled_count,
                     "current_round": run.current_round, "max_rounds": run.max_rounds,
                     "aggregation": run.aggregation_name, "reward_pool": str(run.reward_pool),
                     "syncer": run.syncer, "posted_at": run.posted_at, "posted_at_iso": iso(run.posted_at)})
    return {"total": total, "offset": offset, "limit": limit, "runs": runs, "ipfs_error": ipfs_error,
            "rpc_url": chain.shown_url, "chain_id": chain.chain_id,
            "registry": chain.deployment.contracts["TrainingRegistry"].address}


# ------------------------------------------------------------------------------ one run


def run_view(chain, specs, records, task_id: bytes) -> dict[str, Any]:
    """Everything the run page shows (see the module docstring).

    Raises:
        PageNotFound: no run with this id. RpcUnavailable: the chain does not answer.
    """
    from tenzro_operator.views.run import build

    run = _get_run(chain, task_id)
    spec, spec_error, _ = _spec(specs, run)
    head = chain.block_number()
    events = chain.get_logs(chain.run_start_block(run), head, task_id=task_id)
    view = build(chain, task_id, ipfs=getattr(specs, "ipfs", None), events=events)
    out: dict[str, Any] = {"task_id": "0x" + task_id.hex(), "name": spec.task_id if spec else None,
                           "live": run.status.name in LIVE, "head_block": head,
                           "run": _with_iso(view.run.to_json()), "spec_cid": run.spec_cid,
                           "spec": spec.model_dump(mode="json") if spec else None,
                           "spec_fields": _flatten(spec.model_dump(mode="json")) if spec else [],
                           "spec_error": spec_error}
    out.update(_with_iso(view.summary_json()))
    out["trainers"] = [t.to_json() for t in view.trainers]
    out["rounds"] = _rounds(view, records.losses(out["task_id"]))
    out["evidence"] = [e for e in (_event_json(e) for e in events) if _is_evidence(e)]
    out["events_total"] = len(events)
    out["events"] = [_event_json(e) for e in events[-MAX_EVENTS:]]
    out["receipt"] = _receipt(chain, task_id) if run.status.name == "SEALED" else None
    return out


def _event_json(e: dict[str, Any]) -> dict[str, Any]:
    from tenzro_operator.chain import SlashReason

    args = jsonable(e["args"])
    if e["event"] == "TrainerSlashed" and isinstance(e["args"].get("reason"), int):
        r = e["args"]["reason"]
        args["reason_name"] = SlashReason(r).name if r in SlashReason._value2member_map_ else str(r)
    return {"event": e["event"], "block": e["block_number"], "tx": e["tx_hash"], "log_index": e["log_index"],
            "args": args}


def _is_evidence(e: dict[str, Any]) -> bool:
    if e["event"] == "SyncerElected":
        return str(e["args"].get("previousSlashed", "0")) not in ("0", "")
    return bool(EVIDENCE_EVENT.search(e["event"]))


def _rounds(view, losses: dict[int, dict]) -> list[dict[str, Any]]:
    """Per round, opened or committed (`tenzro_operator.views.run.RoundRow`):
    timing (unix seconds, with ``*_iso``), accepted count, weights root, transcript CID and hash,
    challenge window, proofs and challenges, held-out loss (None unless the syncer's records carry it)."""
    out = []
    for x in view.rounds:
        row = x.to_json()
        row.update(heldout_loss=None, heldout_loss_before=None)
        row.update(losses.get(x.round, {}))
        out.append(_with_iso(row))
    return out


def _receipt(chain, task_id: bytes) -> dict[str, Any]:
    """The sealed receipt, and whether the verifier (0x…1008 on a devnet) returns 0x01 for it."""
    rec = chain.get_receipt(task_id)
    out = _with_iso(rec.to_json())
    out["verifier"] = chain.deployment.verifier_address
    try:
        out["verifier_accepts"], out["verifier_error"] = chain.verify_receipt(rec.serialized, rec.run_root), None
    except ChainError as exc:
        out["verifier_accepts"], out["verifier_error"] = None, str(exc)
    return out


# ------------------------------------------------------------------------------ one round


def round_view(chain, ipfs, task_id: bytes, round_: int) -> dict[str, Any]:
    """A committed round and its transcript (``transcript`` None and
    ``transcript_error`` set when it cannot be fetched or does not match the committed hash).

    Raises:
        PageNotFound: no such run, or no committed round ``round_`` (or it was
            discarded by a fraud proof). IpfsUnavailable: the node is down.
    """
    from tenzro_operator.errors import IpfsContentError, IpfsNotFound
    from tenzro_operator.views.run import build
    from tenzro_operator.transcript import MAX_TRANSCRIPT_BYTES, RoundTranscript, TranscriptError

    run = _get_run(chain, task_id)
    view = build(chain, task_id, trainers=False)
    row = view.round(round_)
    if row is None or not row.live:
        state = f"; round {round_} was discarded by a fraud proof" if row is not None and row.status == "discarded" \
            else ""
        raise PageNotFound(f"run 0x{task_id.hex()} has no committed round {round_} (current round "
                           f"{run.current_round}, status {run.status.name}{state})")
    cid, thash = row.transcript_cid or "", bytes.fromhex((row.transcript_hash or "0x")[2:])
    out = _with_iso({**row.to_json(), "task_id": "0x" + task_id.hex(),
                     "fragment_cids": [], "transcript": None, "transcript_error": None})
    try:
        t = RoundTranscript.parse(ipfs.cat(cid, max_bytes=MAX_TRANSCRIPT_BYTES), expected_hash=thash)
        out["transcript"] = t.model_dump(mode="json")
        out["fragment_cids"] = [f.weights.cid for f in t.fragments]  # the commit names no CIDs: its transcript does
    except (IpfsNotFound, IpfsContentError, TranscriptError) as exc:
        out["transcript_error"] = f"transcript ipfs://{cid}: {exc}"
    return out
