"""``tenzro``: the operator's command line (click).

``tenzro train`` carries the verbs of the Tenzro Train docs: ``post-task``, ``list-runs``,
``get-run``, ``get-receipt``, ``enroll-trainer``, ``submit-gradient`` (the forced path: commit,
then reveal), ``finalize-round`` (``commitRound`` by hand), ``withdraw``, ``verify-receipt``
(replay: ``tenzro_operator.replay``), plus ``register-syncer``, ``elect-syncer``,
``close-enrollment``, ``cancel-task``, ``seal``, ``claim`` and ``reward`` (a trainer's reward,
`tenzro_operator.reward`), ``claim-syncer-fee`` and ``trainer-stats``, ``unregister-syncer``,
``new-spec`` (`tenzro_operator.spec_cli`) and ``export-model`` (`tenzro_operator.forecast_cli`).
``tenzro keys`` makes keystores; ``tenzro balance`` / ``transfer`` / ``faucet``
(`tenzro_operator.wallet_cli`) fund accounts; ``tenzro explorer`` (`tenzro_operator.explorer`)
serves a read-only run explorer to a browser; ``tenzro gateway run`` (`tenzro_operator.gateway`)
serves the ``tenzro_training_*`` JSON-RPC methods.

Every verb takes the common options ``--rpc``, ``--deployments``, ``--keystore``,
``--password-env`` and ``--ipfs`` (also from ``TENZRO_NODE_RPC``, ``TENZRO_DEPLOYMENTS``,
``TENZRO_KEYSTORE``, ``TENZRO_PASSWORD_ENV``, ``TENZRO_IPFS_API``; listed in ``--help``).
``--rpc`` defaults to the ``rpc_url`` of the deployment record, and the chain client refuses a
chain whose block 0 is not the record's. Output is rich tables for
people, ``--format json`` for scripts. Every `TenzroError` is printed as one line
(``Error: ...``) with exit code 1, never a traceback.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from tenzro_operator.cli_common import (
    ENVIRONMENT_HELP, CliGroup, Ctx, common_options, console, echo_json, format_option, hex32, kv_table,
    parse_did, parse_task_id, run_of, tx_out,
)
from tenzro_operator.errors import TenzroError
from tenzro_operator.units import format_tokens, parse_tokens

__all__ = ["cli", "main"]


@click.group(cls=CliGroup, epilog=ENVIRONMENT_HELP)
@click.version_option(package_name="tenzro-train", prog_name="tenzro")
@click.option("--log-level", default="ERROR", envvar="TENZRO_LOG_LEVEL", show_default=True, show_envvar=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False))
@click.option("--log-format", default="text", envvar="TENZRO_LOG_FORMAT", show_default=True, show_envvar=True,
              type=click.Choice(["text", "kv", "json"]),
              help="log lines on stderr: text, kv (key=value) or json (one JSON object per line)")
def cli(log_level: str, log_format: str) -> None:
    """tenzro: operate Tenzro Train runs (chain + IPFS).

    New here? `tenzro balance`, `tenzro faucet` (devnet), `tenzro train new-spec`,
    `tenzro train post-task`: the README's "Your first task" walks the whole path."""
    from tenzro_operator.logs import configure_logging

    configure_logging(log_level, log_format, role="cli")


@cli.group(cls=CliGroup, epilog=ENVIRONMENT_HELP)
def train() -> None:
    """Tenzro Train verbs: post, enroll, submit, finalize, seal, claim, inspect, withdraw, verify."""


@cli.group(cls=CliGroup)
def keys() -> None:
    """Encrypted keystores (eth-account, Web3 Secret Storage v3)."""


# ------------------------------------------------------------------------------ train verbs


@train.command("post-task")
@click.option("--spec", "spec_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="task spec JSON (the Tenzro Train docs' shape, with metadata.protocol)")
@click.option("--no-approve", is_flag=True,
              help="neither sign a permit nor approve: plain postTask on an allowance already set")
@format_option
@common_options
def post_task(ctx: Ctx, spec_path: Path, no_approve: bool, fmt: str) -> None:
    """Validate the spec, check that its dataset and initial weights can be fetched from IPFS and
    match their hashes, pin its canonical JSON, post it and escrow the reward pool in one
    transaction (an ERC-2612 permit of exactly the pool; a token without permits is approved
    first). Nothing is sent when a check fails; no allowance is left behind."""
    from tenzro_operator.spec import canonical_json, load_spec, spec_hash
    from tenzro_operator.task_assets import verify_assets

    spec = load_spec(spec_path)
    spec.require_protocol()
    chain = ctx.chain(signer=True)
    if spec.sponsor_address.lower() != chain.address.lower():
        raise TenzroError(f"spec sponsor_address {spec.sponsor_address} is not the keystore's account "
                          f"{chain.address}: the poster becomes the sponsor")
    ipfs = ctx.ipfs()
    verify_assets(ipfs, spec)  # the dataset and the initial weights: retrievable, and what the spec says
    data = canonical_json(spec)
    cid = ipfs.add(data, pin=True)
    res = chain.post_task(spec, cid, approve=not no_approve)
    from tenzro_operator.roles.sponsor import enable_root_flow

    enable_root_flow(chain, ipfs, spec)  # the initial fragments root and the outer rule, before any enrollment
    tx_out(fmt, "task posted", {"task_id": spec.task_id, "task_id_bytes32": hex32(spec.task_id_bytes),
                                 "spec_cid": cid, "spec_hash": hex32(spec_hash(spec)),
                                 "reward_pool": spec.reward_pool, "tx": res.tx_hash, "block": res.block_number})


@train.command("list-runs")
@click.option("--offset", default=0, show_default=True, type=click.IntRange(min=0))
@click.option("--limit", default=50, show_default=True, type=click.IntRange(min=1, max=1000))
@click.option("--atto", is_flag=True, help="amounts in exact atto-units instead of TNZO")
@format_option
@common_options
def list_runs(ctx: Ctx, offset: int, limit: int, atto: bool, fmt: str) -> None:
    """Runs in posting order: full task id and the spec's name, status, round, enrollment, rule,
    pool, syncer, posting time (ISO-8601 UTC). A name shows "?" when the spec cannot be fetched."""
    chain = ctx.chain()
    ids, total = chain.list_runs(offset, limit)
    runs = [chain.get_run(i) for i in ids]
    if fmt == "json":
        echo_json({"total": total, "offset": offset, "runs": [r.to_json() for r in runs]})
        return
    names = _spec_names(ctx, runs)
    amount = (lambda a: f"{a} atto") if atto else format_tokens
    t = Table(title=f"runs {offset + 1 if ids else 0}-{offset + len(ids)} of {total}")
    for col in ("task id", "name", "status", "round", "trainers", "K", "F", "rule", "pool", "syncer", "posted"):
        t.add_column(col, overflow="fold")
    for r in runs:
        t.add_row(hex32(r.task_id), names.get(r.task_id, "?"), r.status.name, f"{r.current_round}/{r.max_rounds}",
                  f"{r.enrolled_count}/{r.trainer_count}", str(r.quorum), str(r.fragment_count),
                  r.aggregation_name, amount(r.reward_pool), r.syncer, _when(r.posted_at))
    console().print(t)


def _spec_names(ctx: Ctx, runs) -> dict[bytes, str]:
    """task id -> the spec's ``task_id`` name, for the runs whose spec the IPFS node serves (checked
    against the on-chain spec hash; a run whose spec cannot be fetched is left out)."""
    from tenzro_operator.errors import IpfsError, SpecError
    from tenzro_operator.task_assets import fetch_spec

    ipfs, out = ctx.ipfs(), {}
    for r in runs:
        try:
            out[r.task_id] = fetch_spec(ipfs, r.spec_cid, r.spec_hash).task_id
        except (IpfsError, SpecError, TenzroError):
            continue
    return out


def _when(ts: int) -> str:
    """Unix seconds as ISO-8601 UTC with the raw value: ``2026-11-22T18:41:17Z (1795372877)``; 0 is "-"."""
    if not ts:
        return "-"
    return f"{datetime.fromtimestamp(ts, timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')} ({ts})"


@train.command("get-run")
@click.option("--task-id", required=True, help="the spec's task_id string, or 0x + 64 hex digits")
@click.option("--trainers/--no-trainers", default=True, help="include per-trainer metrics")
@click.option("--atto", is_flag=True, help="amounts in exact atto-units instead of TNZO")
@format_option
@common_options
def get_run(ctx: Ctx, task_id: str, trainers: bool, atto: bool, fmt: str) -> None:
    """One run: status, parameters, its phase and when that next changes (ISO-8601 UTC), pool;
    per round: commit time, challenge window, accepted count, weights root, transcript; per
    trainer: submitted / accepted / scored out / credits / reward / claimed (`tenzro_operator.run_view`;
    submitted and scored out come from the transcripts on IPFS)."""
    from tenzro_operator.run_view import build

    chain = ctx.chain()
    run = run_of(chain, task_id)
    view = build(chain, run.task_id, ipfs=ctx.ipfs() if trainers else None, trainers=trainers)
    if fmt == "json":
        out = view.to_json(trainers=True)
        echo_json(out)
        return
    amount = (lambda a: f"{a} atto") if atto else format_tokens
    run = view.run
    rows = [("task id", hex32(run.task_id)), ("status", run.status.name),
            ("next change", f"{view.next_change} at {_when(view.next_change_at)}" if view.next_change_at
             else view.next_change),
            ("sponsor", run.sponsor),
            ("syncer", run.syncer), ("spec cid", run.spec_cid), ("spec hash", hex32(run.spec_hash)),
            ("round", f"{run.current_round} of {run.max_rounds}"), ("deadline", _when(run.round_deadline)),
            ("trainers (enrolled/M)", f"{run.enrolled_count}/{run.trainer_count}"),
            ("quorum K", run.quorum), ("fragments F", run.fragment_count), ("inner steps H", run.inner_steps),
            ("aggregation", run.aggregation_name), ("grace window", f"{run.grace_window_seconds} s"),
            ("min stake", amount(run.min_stake)), ("reward pool", amount(run.reward_pool)),
            ("pool left", amount(run.reward_pool_left)), ("stakes held", amount(run.stake_held)),
            ("total credits", view.total_credits),
            ("enrollment deadline", _when(run.enrollment_deadline)),
            ("syncer fee", f"{run.syncer_fee_bps} bps of the pool"), ("syncer bond", amount(run.syncer_bond)),
            ("syncer fees accrued", amount(run.syncer_fees_accrued)),
            ("syncer elected at", _when(run.syncer_elected_at)),
            ("syncer replaceable at", _when(run.syncer_replaceable_at)),
            ("election requested at block", run.election_block or "-"),
            ("weights root", hex32(run.weights_root))]
    if view.commit_phase_closes_at:
        rows.append(("commit phase closes", _when(view.commit_phase_closes_at)))
    if view.claimable_pool is not None:
        rows += [("claimable pool", amount(view.claimable_pool)), ("claimed", amount(view.claimed_total)),
                 ("claims close", _when(view.claim_deadline or 0))]
    if view.swept is not None:
        rows.append(("swept to the sponsor", amount(view.swept)))
    rows += [("transcripts", e) for e in view.transcript_errors]
    kv_table("run", rows)
    if view.rounds:
        t = Table(title="rounds")
        for col in ("round", "status", "committed", "challenge window ends", "accepted", "weights root",
                    "transcript"):
            t.add_column(col, overflow="fold")
        for r in view.rounds:
            t.add_row(str(r.round), r.status, _when(r.committed_at or 0), _when(r.challenge_window_ends_at or 0),
                      "-" if r.accepted_count is None else str(r.accepted_count), r.weights_root or "-",
                      r.transcript_cid or "-")
        console().print(t)
    if view.trainers:
        t = Table(title="trainers")
        for col in ("#", "trainer", "submitted", "accepted", "scored out", "credits", "stake",
                    "slashed", "reward", "claimed"):
            t.add_column(col)
        for s in view.trainers:
            t.add_row(str(s.index), s.trainer, "?" if s.submitted is None else str(s.submitted), str(s.accepted),
                      "?" if s.scored_out is None else str(s.scored_out), str(s.credits), amount(s.stake),
                      amount(s.slashed),
                      amount(s.current_reward), amount(s.claimed_reward) if s.claimed else "")
        console().print(t)


@train.command("get-receipt")
@click.option("--task-id", required=True)
@format_option
@common_options
def get_receipt(ctx: Ctx, task_id: str, fmt: str) -> None:
    """The sealed receipt, and whether the verifier (0x…1008 on devnets) accepts it."""
    chain = ctx.chain()
    rec = chain.get_receipt(parse_task_id(task_id))
    ok = chain.verify_receipt(rec.serialized, rec.run_root)
    out = rec.to_json()
    out["verifier_accepts"] = ok
    if fmt == "json":
        echo_json(out)
    else:
        rows = [(k, _when(v) if k == "sealed_at" else v) for k, v in out.items() if k != "serialized"]
        kv_table("training receipt", rows + [("serialized", f"{len(rec.serialized)} bytes")])


@train.command("enroll-trainer")
@click.option("--task-id", required=True)
@click.option("--stake", required=True, help="tokens ('100', '1.5') or atto-units ('1000atto')")
@click.option("--did", required=True, callback=lambda _c, _p, v: parse_did(v),
              help="the trainer's DID, e.g. did:tenzro:machine:gpu-host-1 (W3C DID syntax, at most 128 bytes)")
@format_option
@common_options
def enroll_trainer(ctx: Ctx, task_id: str, stake: str, did: str, fmt: str) -> None:
    """Stake and enroll in a run in one transaction (an ERC-2612 permit of exactly the stake; a
    token without permits is approved first); prints the shard assigned. No allowance is left."""
    try:
        amount = parse_tokens(stake)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--stake") from None
    chain = ctx.chain(signer=True)
    run = run_of(chain, task_id)
    stats = chain.trainer_stats(run.task_id)
    if stats.enrolled:
        raise TenzroError(f"{chain.address} is already enrolled in run {task_id} as trainer {stats.index} "
                          f"(`tenzro train trainer-stats --task-id {task_id}` shows it); nothing was sent")
    res = chain.enroll_trainer(run.task_id, amount, did)
    ev = res.event("TrainerEnrolled")
    tx_out(fmt, "enrolled", {"trainer": chain.address, "index": ev["index"], "shard": ev["shard"],
                              "shard_count": ev["shardCount"], "stake": str(ev["stake"]), "tx": res.tx_hash})


@train.command("submit-gradient")
@click.option("--task-id", required=True)
@click.option("--round", "round_", required=True, type=click.IntRange(min=0))
@click.option("--fragment", required=True, type=click.IntRange(min=0, max=65535))
@click.option("--payload", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="the encoded outer gradient (safetensors bytes of tenzro_trainer.codec)")
@click.option("--skip-check", is_flag=True,
              help="send without the local payload check (a payload the syncer rejects gets the trainer slashed)")
@click.option("--no-wait", is_flag=True,
              help="in the commit phase: commit and return; run the same command again after the phase to reveal")
@format_option
@common_options
def submit_gradient(ctx: Ctx, task_id: str, round_: int, fragment: int, payload: Path, skip_check: bool,
                    no_wait: bool, fmt: str) -> None:
    """The forced path by hand (contracts/PROTOCOL.md §5 "Forced inclusion"): check the payload
    locally as the syncer will (codec, round and fragment, tensor names, shapes, dtype, finite
    values, the norm screen against the previous round's accepted sums; against the task's spec),
    pin it to IPFS and sign (EIP-712) its CID, sha256 and chunk commitment. In the round's commit
    phase: commit to it on-chain (``commitSubmission``), wait for the phase to close (chain time)
    and reveal it (``submitOuterGradient``); with ``--no-wait`` return after the commitment. After
    the phase: reveal the commitment made before (the same command, the same payload). The syncer
    must then accept it, prove it invalid or challenge its availability."""
    from tenzro_operator.chain import RunStatus, SignedPayload

    data = payload.read_bytes()
    digest = hashlib.sha256(data).digest()
    chain = ctx.chain(signer=True)
    ipfs = ctx.ipfs()
    run = run_of(chain, task_id)
    norm = None
    from tenzro_operator.task_assets import fetch_spec
    from tenzro_operator.task_runtime import TaskRuntime

    spec = runtime = None
    try:  # the spec's codec decodes the payload for its commitment, checked or not
        spec = fetch_spec(ipfs, run.spec_cid, run.spec_hash)
        runtime = TaskRuntime.from_spec(spec)
    except TenzroError:
        if not skip_check:
            raise  # --skip-check without a spec: the payload is committed to as a dense one
    if not skip_check:
        from tenzro_operator.payload_check import check_payload

        if run.status != RunStatus.TRAINING or run.current_round != round_:
            state = (f"round {run.current_round} is open" if run.status == RunStatus.TRAINING
                     else f"the run is {run.status.name}, not TRAINING")
            raise TenzroError(f"cannot submit for round {round_}: {state}")
        norm = check_payload(data, runtime, round_, fragment, source=str(payload))
    root, sumsq = _payload_commitment(data, runtime, fragment, skip_check)
    if not skip_check:
        _check_norm_screen(chain, ipfs, run, round_, fragment, sumsq, spec.require_protocol().norm_screen_sq_bits)
    cid = ipfs.add(data, pin=True)
    res = _commit_and_reveal(chain, run, round_, fragment, SignedPayload(root, sumsq, cid, digest),
                             say=fmt != "json", wait=not no_wait)
    if res is None:
        tx_out(fmt, "committed", {"cid": cid, "payload_sha256": hex32(digest), "payload_root": hex32(root),
                                   "round": round_, "fragment": fragment, "reveal_after": _when(chain.commit_phase(
                                       run.task_id)[0])})
        return
    tx_out(fmt, "submitted", {"cid": cid, "payload_sha256": hex32(digest), "payload_root": hex32(root),
                               "bytes": len(data),
                               "round": round_, "fragment": fragment, "tx": res.tx_hash, "gas": res.gas_used,
                               "l2_norm": norm if norm is None else round(norm, 6)})


def _commit_and_reveal(chain, run, round_: int, fragment: int, payload, wait_s: float = 600.0, say: bool = True,
                       wait: bool = True):
    """Sign ``payload`` over the open round's input weights. In the commit phase: ``commitSubmission``
    its commitment, then (``wait``) wait until the phase has closed in chain time (on a devnet an
    empty block is mined to move the head's clock) and ``submitOuterGradient``; without ``wait``
    return None after the commitment. After the phase: only the reveal. ``say``: print the wait to
    stderr. Returns the reveal's `TxResult` (None: committed only).

    Raises:
        ChainRevert: a refusal (``Registry__NotCommitted`` for a reveal with no commitment of this
            payload, ``Registry__DuplicateSubmission``, ``Registry__DeadlinePassed``, ...).
        TenzroError: the phase did not close within ``wait_s`` seconds.
    """
    import time

    from tenzro_operator.errors import ChainRevert
    from tenzro_operator.root_flow import RevealMessage

    signed = chain.sign_outer_gradient(run.task_id, round_, fragment, payload, base_root=run.weights_root)
    m = RevealMessage.of(run.task_id, round_, fragment, chain.address, run.weights_root, signed)
    closes = chain.commit_phase(run.task_id)[0]
    if chain.block_timestamp("latest") < closes:  # the next block is still inside the phase (<= closes)
        chain.commit_submission(run.task_id, round_, fragment, m.commitment())
        if not wait:
            return None
        if say:
            click.echo(f"committed; revealing once the commit phase closes ({_when(closes)})", err=True)
    give_up = time.monotonic() + wait_s
    while True:
        if chain.block_timestamp("latest") <= closes:
            time.sleep(min(2.0, max(0.2, closes + 1 - time.time())))
            chain.nudge_devnet(closes)  # a devnet mines only for transactions
        try:
            return chain.submit_outer_gradient(run.task_id, round_, fragment, m.signed_payload())
        except ChainRevert as exc:
            if exc.error_name != "Registry__CommitPhaseOpen":
                raise
            if time.monotonic() > give_up:
                raise TenzroError(f"the commit phase of round {round_} did not close within {wait_s:g} s "
                                  f"(it closes at {_when(closes)} chain time)") from None


def _check_norm_screen(chain, ipfs, run, round_: int, fragment: int, sumsq: int, screen_sq_bits: int) -> None:
    """Refuse a payload the registry's norm screen would prove an outlier (``proveNormOutlier``,
    PROTOCOL.md §4): its sum of squares over ``screen x`` the median of the previous committed
    round's accepted sums of the fragment (from that round's transcript on IPFS); sending it would
    get this trainer slashed. Round 0, or a previous round that accepted nothing on the fragment,
    has no reference: nothing to check."""
    from tenzro_operator.evidence import bits_to_f32, exceeds_reference
    from tenzro_operator.root_flow import RootFlowError, committed_round
    from tenzro_operator.transcript import MAX_TRANSCRIPT_BYTES, RoundTranscript

    if round_ == 0 or not screen_sq_bits:
        return
    try:
        ev = committed_round(chain, run.task_id, chain.run_start_block(run), round_ - 1)
    except RootFlowError:
        return  # no committed round before (a rewind): no reference
    tr = RoundTranscript.parse(ipfs.cat(ev["transcriptCid"], max_bytes=MAX_TRANSCRIPT_BYTES),
                               bytes(ev["transcriptHash"]))
    sums = [int(s.payload_sumsq) for fr in tr.fragments if fr.fragment == fragment for s in fr.accepted
            if s.payload_sumsq is not None]
    if exceeds_reference(sumsq, sums, screen_sq_bits):
        raise click.ClickException(
            f"--payload: its squared L2 norm {bits_to_f32(sumsq):.6g} is above the task's screen "
            f"({bits_to_f32(screen_sq_bits):g} x the median of round {round_ - 1}'s {len(sums)} accepted sums of "
            f"fragment {fragment}): it would be proven a NormOutlier and this trainer slashed; --skip-check sends "
            f"it anyway")


def _payload_commitment(data: bytes, runtime, fragment: int, skip_check: bool) -> tuple[bytes, int]:
    """The chunk commitment (PROTOCOL.md §2) of the payload's tensors as decoded under the task's
    codec (`TaskRuntime.decode_payload`; ``runtime`` None, a ``--skip-check`` whose spec could not
    be fetched: as a dense payload), which the submission signs: ``(root, binary32 bits of the
    squared norm)``. With ``--skip-check`` bytes that do not decode are sent under an empty
    commitment (the syncer will challenge them)."""
    from tenzro_trainer.codec import decode_fragment
    from tenzro_trainer.commitment import ChunkTree, flatten_fragment
    from tenzro_trainer.errors import PayloadError

    try:
        if runtime is None:
            tensors, _ = decode_fragment(data)
        elif not 0 <= fragment < len(runtime.layouts):
            raise PayloadError(f"fragment {fragment} does not exist (the task has {len(runtime.layouts)})")
        else:
            tensors, _ = runtime.decode_payload(data, fragment)
        return ChunkTree(flatten_fragment(tensors)).root
    except PayloadError as exc:
        if not skip_check:
            raise click.ClickException(f"--payload: {exc}") from None
        return b"\x00" * 32, 0


@train.command("finalize-round")
@click.option("--commit", "commit_path", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="JSON: task_id, round, fragments_root, accepted_bitmaps, previous_credits, fragment_hashes, "
                   "transcript_hash, transcript_cid")
@format_option
@common_options
def finalize_round(ctx: Ctx, commit_path: Path, fmt: str) -> None:
    """(Syncer, by hand) commit the open round by root (``commitRound``, contracts/PROTOCOL.md §5)
    from a JSON file: the fragments root, one accepted bitmap and the cumulative credits before the
    round per trainer index, the F fragment hashes (the new weights' §2 roots), the transcript's
    sha256 and CID. The syncer daemon does this itself; this is for when it cannot."""
    try:
        doc = json.loads(commit_path.read_text())
        if not isinstance(doc, dict):
            raise TypeError("expected a JSON object")
        ints = lambda k: [int(x, 0) if isinstance(x, str) else int(x) for x in doc[k]]  # noqa: E731

        def b32(v) -> bytes:
            b = bytes.fromhex(str(v).removeprefix("0x"))
            if len(b) != 32:
                raise ValueError(f"{v!r} is not 32 bytes of hex")
            return b

        args = dict(task_id=parse_task_id(str(doc["task_id"])), round=int(doc["round"]),
                    fragments_root=b32(doc["fragments_root"]), accepted_bitmaps=ints("accepted_bitmaps"),
                    previous_credits=ints("previous_credits"),
                    fragment_hashes=[b32(h) for h in doc["fragment_hashes"]],
                    transcript_hash=b32(doc["transcript_hash"]), transcript_cid=str(doc["transcript_cid"]))
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise TenzroError(f"{commit_path}: not a round commit ({type(exc).__name__}: {exc})") from None
    chain = ctx.chain(signer=True)
    res = chain.commit_round(**args)
    ev = res.event("RoundCommitted")
    tx_out(fmt, "round committed", {"round": ev["round"], "weights_root": hex32(ev["weightsRoot"]),
                                     "credits_root": hex32(ev["creditsRoot"]), "total_credits": str(ev["totalCredits"]),
                                     "tx": res.tx_hash, "gas": res.gas_used})


@train.command("cancel-task")
@click.option("--task-id", required=True)
@format_option
@common_options
def cancel_task(ctx: Ctx, task_id: str, fmt: str) -> None:
    """Cancel a run that is still Enrolling: the sponsor at any time, anyone once its enrollment
    deadline has passed with fewer than K trainers enrolled. The reward pool and every stake are
    credited back in full (collect them with `withdraw`)."""
    res = ctx.chain(signer=True).cancel_task(parse_task_id(task_id))
    ev = res.event("TaskCancelled")
    tx_out(fmt, "task cancelled", {"task_id": hex32(ev["taskId"]), "pool_refunded": str(ev["poolRefunded"]),
                                    "pool_refunded_tokens": format_tokens(ev["poolRefunded"]),
                                    "trainers_refunded": ev["trainersRefunded"], "tx": res.tx_hash})


@train.command("close-enrollment")
@click.option("--task-id", required=True)
@format_option
@common_options
def close_enrollment(ctx: Ctx, task_id: str, fmt: str) -> None:
    """Anyone, once the run's enrollment deadline has passed: open round 0 with the trainers
    enrolled so far (at least K of the M slots; the M-th enrollment opens it by itself)."""
    res = ctx.chain(signer=True).close_enrollment(parse_task_id(task_id))
    ev = res.event("RoundOpened")
    tx_out(fmt, "round 0 opened", {"task_id": hex32(ev["taskId"]), "round": ev["round"],
                                    "deadline": ev["deadline"], "tx": res.tx_hash})


@train.command("seal")
@click.option("--task-id", required=True)
@format_option
@common_options
def seal(ctx: Ctx, task_id: str, fmt: str) -> None:
    """Anyone, once the last round is done (Completed): seal the run with ``sealRootRun`` after the
    last round's challenge window (the receipt is stored, stakes refunded, claims open: `tenzro
    train claim`). The daemons do this themselves; this is for when they cannot."""
    chain = ctx.chain(signer=True)
    tid = run_of(chain, task_id).task_id
    res = chain.seal_root_run(tid)
    ev = res.event("RootRunSealed")
    tx_out(fmt, "run sealed", {"task_id": hex32(ev["taskId"]), "claimable": str(ev["claimable"]),
                                "claimable_tokens": format_tokens(ev["claimable"]),
                                "claim_deadline": _when(int(ev["claimDeadline"])), "tx": res.tx_hash})


@train.command("reward")
@click.option("--task-id", required=True)
@click.option("--trainer", required=True, help="the trainer's address")
@click.option("--atto", is_flag=True, help="amounts in exact atto-units instead of TNZO (JSON is always atto)")
@format_option
@common_options
def reward(ctx: Ctx, task_id: str, trainer: str, atto: bool, fmt: str) -> None:
    """A trainer's reward in a run, recomputed from the chain alone and shown with its
    working: credits per committed round (fragment sizes of its accepted bitmap), the total, the
    pool they share, ``pool * credits // total``, and whether the credits give the registry's
    credits root (`tenzro_operator.reward`). No key needed."""
    from tenzro_operator.reward import reward_report

    chain = ctx.chain()
    tid = run_of(chain, task_id).task_id
    rep = reward_report(chain, tid, trainer)  # RunViewError (a TenzroError): one line
    amount = (lambda a: f"{a} atto") if atto else format_tokens
    if fmt == "json":
        echo_json({"trainer": rep.trainer, "index": rep.index, "credits": str(rep.credits),
                    "total_credits": str(rep.total_credits), "pool": str(rep.pool), "sealed": rep.sealed,
                    "reward": str(rep.reward), "claimed": rep.claimed, "claimed_amount": str(rep.claimed_amount),
                    "credits_root": hex32(rep.credits_root),
                    "rounds": [{"round": r, "accepted_bitmap": b, "credits": str(c)} for r, b, c in rep.per_round]})
        return
    rows = [(f"round {r}", f"bitmap {b:#b}: {c:,} credits") for r, b, c in rep.per_round]
    pool_is = "claimable after the seal" if rep.sealed else "pool left now (not sealed: fees and later rounds change it)"
    rows += [("credits", f"{rep.credits:,} of {rep.total_credits:,} (the registry's credits root "
                         f"{hex32(rep.credits_root)[:18]}… checks out)"),
             ("pool", f"{amount(rep.pool)} ({pool_is})"),
             ("reward", f"{amount(rep.reward)} = pool x {rep.credits:,} / {rep.total_credits:,}"),
             ("claimed", f"yes: {amount(rep.claimed_amount)}" if rep.claimed else
              ("no: `tenzro train claim` (anyone may)" if rep.sealed else "no: claims open at the seal"))]
    kv_table(f"reward of trainer {rep.index} ({rep.trainer})", rows)


@train.command("claim")
@click.option("--task-id", required=True)
@click.option("--trainer", default=None, help="the trainer to claim for (anyone may; the reward goes to the "
                                               "trainer) [default: the keystore's account]")
@format_option
@common_options
def claim(ctx: Ctx, task_id: str, trainer: str | None, fmt: str) -> None:
    """After the seal: ``claim`` a trainer's reward with the Merkle proof of its credits
    (recomputed from the chain, `tenzro train reward` shows how); the reward becomes withdrawable
    by the trainer (`tenzro train withdraw`)."""
    from tenzro_operator.reward import reward_report

    chain = ctx.chain(signer=trainer is None)  # with --trainer the key is unlocked only to send
    tid = run_of(chain, task_id).task_id
    rep = reward_report(chain, tid, trainer or chain.address)  # RunViewError (a TenzroError): one line
    if not rep.sealed:
        raise TenzroError(f"run {task_id} is not sealed yet: claims open at the seal (`tenzro train get-run` "
                          "says when); nothing was sent")
    if rep.claimed:
        raise TenzroError(f"trainer {rep.index} ({rep.trainer}) has claimed already: "
                          f"{format_tokens(rep.claimed_amount)}; nothing was sent")
    if rep.credits == 0:
        raise TenzroError(f"trainer {rep.index} ({rep.trainer}) has no credits in this run: nothing to claim")
    if trainer is not None:
        chain = ctx.chain(signer=True)
    res = chain.claim_reward(tid, rep.index, rep.credits, rep.proof)
    ev = res.event("RewardClaimed")
    tx_out(fmt, "reward claimed", {"trainer": ev["trainer"], "index": ev["index"], "credits": str(ev["credits"]),
                                    "reward": str(ev["reward"]), "reward_tokens": format_tokens(ev["reward"]),
                                    "tx": res.tx_hash})


@train.command("withdraw")
@format_option
@common_options
def withdraw(ctx: Ctx, fmt: str) -> None:
    """Pull rewards, refunds and released stake credited to the keystore's account."""
    chain = ctx.chain(signer=True)
    res = chain.withdraw()
    amount = res.event("Withdrawn")["amount"]
    tx_out(fmt, "withdrawn", {"account": chain.address, "amount": str(amount),
                               "amount_tokens": format_tokens(amount), "tx": res.tx_hash})


@train.command("register-syncer")
@click.option("--stake", required=True, help="tokens or '<n>atto'")
@format_option
@common_options
def register_syncer(ctx: Ctx, stake: str, fmt: str) -> None:
    """Join the syncer candidate pool (approve + stake; a first registration needs at least the
    registry's minimum syncer stake), or add stake to cover the bonds of more runs."""
    try:
        amount = parse_tokens(stake)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--stake") from None
    chain = ctx.chain(signer=True)
    info = chain.syncer_info()
    if not info.registered:
        need = chain.min_syncer_stake()
        if amount < need:
            raise TenzroError(f"a first syncer registration needs a stake of at least {format_tokens(need)} "
                              f"(the registry's minSyncerStake), got {format_tokens(amount)}")
    res = chain.register_syncer(amount)
    after = chain.syncer_info()
    tx_out(fmt, "syncer registered", {"syncer": chain.address, "stake_added": str(amount),
                                       "stake": str(after.stake), "locked": str(after.locked), "tx": res.tx_hash})


@train.command("unregister-syncer")
@format_option
@common_options
def unregister_syncer(ctx: Ctx, fmt: str) -> None:
    """Leave the syncer candidate pool, in two calls: the first stops the account from being drawn
    in elections requested from then on; the second, once the elections requested before can no
    longer be resolved (ELECTION_WINDOW_BLOCKS later), credits the whole pool stake back (collect
    it with `withdraw`). Refused while the account is the syncer of a run that is not sealed."""
    chain = ctx.chain(signer=True)
    info = chain.syncer_info()
    if not info.registered:
        raise TenzroError(f"{chain.address} is not a syncer candidate: nothing to unregister")
    if info.active_tasks:
        raise TenzroError(f"{chain.address} is the syncer of {info.active_tasks} run(s) not yet sealed; "
                          f"unregister once they are (its bonds, {format_tokens(info.locked)}, are locked until then)")
    owed = chain.withdrawable()
    res = chain.unregister_syncer()
    leaving = res.events_named("SyncerLeaving")
    if leaving:
        from_block = int(leaving[0]["fromBlock"])
        tx_out(fmt, "syncer leaving", {"syncer": chain.address, "stake": str(info.stake),
                                        "stake_tokens": format_tokens(info.stake), "withdrawable_from_block": from_block,
                                        "next": f"tenzro train unregister-syncer (from block {from_block})",
                                        "tx": res.tx_hash})
        return
    released = chain.withdrawable() - owed
    tx_out(fmt, "syncer unregistered", {"syncer": chain.address, "stake_released": str(released),
                                         "stake_released_tokens": format_tokens(released),
                                         "next": "tenzro train withdraw", "tx": res.tx_hash})


@train.command("elect-syncer")
@click.option("--task-id", required=True)
@format_option
@common_options
def elect_syncer(ctx: Ctx, task_id: str, fmt: str) -> None:
    """Anyone: elect a syncer for a Training run that has none, or replace one that became
    replaceable (its bond is burned). Two transactions: requestSyncerElection, then electSyncer
    from the next block (whose hash of the request block seeds the stake-weighted draw)."""
    chain = ctx.chain(signer=True)
    tx_out(fmt, "syncer elected", {"syncer": chain.run_syncer_election(parse_task_id(task_id))})


@train.command("claim-syncer-fee")
@click.option("--task-id", required=True)
@format_option
@common_options
def claim_syncer_fee(ctx: Ctx, task_id: str, fmt: str) -> None:
    """Syncer, after the seal: move the fees it accrued in a run (one per round it finalized) to
    its withdrawable balance (collect with `withdraw`)."""
    chain = ctx.chain(signer=True)
    amount = chain.claim_syncer_fee(parse_task_id(task_id))
    tx_out(fmt, "syncer fee claimed", {"syncer": chain.address, "amount": str(amount),
                                        "amount_tokens": format_tokens(amount)})


@train.command("trainer-stats")
@click.option("--task-id", required=True)
@click.option("--trainer", default=None, help="address (default: the keystore's)")
@click.option("--atto", is_flag=True, help="amounts in exact atto-units instead of TNZO (JSON is always atto)")
@format_option
@common_options
def trainer_stats(ctx: Ctx, task_id: str, trainer: str | None, atto: bool, fmt: str) -> None:
    """Submitted / accepted / scored out (with reasons) / missed / credits / stake / slashed /
    reward (claimable and claimed) of one trainer (`tenzro_operator.run_view`;
    submitted and scored out come from the transcripts on IPFS: null when they cannot be read)."""
    from tenzro_operator.run_view import RunViewError, build

    chain = ctx.chain(signer=trainer is None)
    tid = run_of(chain, task_id).task_id
    address = trainer or chain.address
    view = build(chain, tid, ipfs=ctx.ipfs())
    try:
        out = view.trainer(address).to_json()
    except RunViewError:  # not enrolled: the registry's zeros, as before
        out = chain.trainer_stats(tid, address).to_json()
    out.update(phase=view.phase)
    if view.transcript_errors:
        out["transcript_errors"] = view.transcript_errors
    if fmt != "json":
        if not atto:
            out.update({k: format_tokens(int(out[k])) for k in ("stake", "slashed", "current_reward",
                                                                 "claimed_reward") if k in out})
        if "scored_out_reasons" in out:
            out["scored_out_reasons"] = "; ".join(f"round {x['round']} fragment {x['fragment']}: {x['reason']}"
                                                  for x in out["scored_out_reasons"]) or "-"
        for k in ("submitted", "scored_out"):
            if k in out and out[k] is None:
                out[k] = "? (transcripts not read)"
    tx_out(fmt, "trainer", out)


@train.command("verify-receipt")
@click.option("--task-id", required=True)
@click.option("--commitments-only", is_flag=True,
              help="check transcripts, bitmaps, digests and roots without fetching every payload")
@format_option
@common_options
def verify_receipt(ctx: Ctx, task_id: str, commitments_only: bool, fmt: str) -> None:
    """Replay the run off-chain (transcripts and payloads from IPFS) and check the receipt, the run
    root and the final model hash against the chain and the verifier. Exit 1 on any mismatch."""
    from rich.progress import Progress

    from tenzro_operator.replay import verify_receipt as replay_verify

    if fmt == "json":
        report = replay_verify(ctx.chain(), ctx.ipfs(), parse_task_id(task_id), check_payloads=not commitments_only)
        echo_json(report.to_json())
    else:
        with Progress(console=console(), transient=True) as bar:
            tasks: dict[str, Any] = {}

            def progress(stage: str, done: int, total: int) -> None:
                if stage not in tasks:
                    tasks[stage] = bar.add_task(f"replay: {stage}s", total=total)
                bar.update(tasks[stage], completed=done, total=total)

            report = replay_verify(ctx.chain(), ctx.ipfs(), parse_task_id(task_id), check_payloads=not commitments_only,
                                   progress=progress)
        report.render(console())
    if not report.ok:
        raise click.exceptions.Exit(1)


# ------------------------------------------------------------------------------ keys


@keys.command("new")
@click.option("--out", required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--password-env", default="TENZRO_KEYSTORE_PASSWORD", show_default=True)
@click.option("--import-key-env", default=None, help="env var holding a private key to import (else a new key)")
def keys_new(out: Path, password_env: str, import_key_env: str | None) -> None:
    """Create an encrypted keystore (password from --password-env or a prompt); prints the address."""
    import os

    from tenzro_operator.keys import create_keystore, resolve_password

    key = None
    if import_key_env:
        key = os.environ.get(import_key_env)
        if not key:
            raise TenzroError(f"${import_key_env} is not set")
    click.echo(create_keystore(out, resolve_password(password_env, what=str(out)), key))


@keys.command("devnet")
@click.option("--dir", "directory", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--role", "roles", multiple=True, required=True, help="ROLE=INDEX of anvil's accounts, repeatable")
@click.option("--password-env", default="TENZRO_KEYSTORE_PASSWORD", show_default=True)
def keys_devnet(directory: Path, roles: tuple[str, ...], password_env: str) -> None:
    """Keystores from anvil's well-known test accounts (devnets only)."""
    from tenzro_operator.keys import anvil_account, create_devnet_keystores, resolve_password

    mapping = {}
    for r in roles:
        name, _, idx = r.partition("=")
        if not name or not idx.isdigit():
            raise click.BadParameter(f"{r!r}: expected ROLE=INDEX", param_hint="--role")
        mapping[name] = int(idx)
    paths = create_devnet_keystores(directory, mapping, resolve_password(password_env, what="devnet keystores"))
    for role, p in paths.items():
        click.echo(f"{role}\t{anvil_account(mapping[role]).address}\t{p}")


def _attach_daemons() -> None:
    """``tenzro syncer run --config syncer.yaml`` and ``tenzro trainer run --config trainer.yaml``:
    the same commands as ``python -m tenzro_operator.syncer_cli`` and ``tenzro-trainer``;
    ``tenzro watcher run --config watcher.yaml`` (`tenzro_operator.watcher_cli`)."""
    from tenzro_operator import syncer_cli, trainer_cli, watcher_cli

    cli.add_command(syncer_cli.cli, "syncer")
    cli.add_command(trainer_cli.cli, "trainer")
    cli.add_command(watcher_cli.cli, "watcher")


_attach_daemons()

from tenzro_operator import forecast_cli  # noqa: E402  (export-model, forecast: after the groups exist)

forecast_cli.register(cli, train)

from tenzro_operator import spec_cli, wallet_cli  # noqa: E402  (new-spec; balance, transfer, faucet)

spec_cli.register(train)
wallet_cli.register(cli)

from tenzro_operator.explorer import cli as explorer_cli  # noqa: E402  (tenzro explorer)

explorer_cli.register(cli)

from tenzro_operator.gateway import cli as gateway_cli  # noqa: E402  (tenzro gateway run)

gateway_cli.register(cli)


def main(argv: list[str] | None = None) -> None:
    """Console script entry point (``tenzro``)."""
    cli.main(args=argv, prog_name="tenzro")


if __name__ == "__main__":  # pragma: no cover
    main()
