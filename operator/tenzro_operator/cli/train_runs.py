"""``tenzro train`` verbs of a run's life and record: ``post-task``, ``list-runs``, ``get-run``,
``get-receipt``, ``close-enrollment``, ``cancel-task``, ``seal``, ``sweep``, ``trainer-stats`` and
``verify-receipt`` (replay: `tenzro_operator.replay`). Registered on the group by
`tenzro_operator.cli.main`, which this module never imports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.table import Table

from tenzro_operator.cli.common import (
    Ctx, common_options, console, echo_json, format_option, hex32, kv_table, parse_task_id, run_of, tx_out, when,
)
from tenzro_operator.errors import TenzroError
from tenzro_operator.units import format_tokens


@click.command("post-task")
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


@click.command("list-runs")
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
                  r.aggregation_name, amount(r.reward_pool), r.syncer, when(r.posted_at))
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


@click.command("get-run")
@click.option("--task-id", required=True, help="the spec's task_id string, or 0x + 64 hex digits")
@click.option("--trainers/--no-trainers", default=True, help="include per-trainer metrics")
@click.option("--atto", is_flag=True, help="amounts in exact atto-units instead of TNZO")
@format_option
@common_options
def get_run(ctx: Ctx, task_id: str, trainers: bool, atto: bool, fmt: str) -> None:
    """One run: status, parameters, its phase and when that next changes (ISO-8601 UTC), pool;
    per round: commit time, challenge window, accepted count, weights root, transcript; per
    trainer: submitted / accepted / scored out / credits / reward / claimed (`tenzro_operator.views.run`;
    submitted and scored out come from the transcripts on IPFS)."""
    from tenzro_operator.views.run import build

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
            ("next change", f"{view.next_change} at {when(view.next_change_at)}" if view.next_change_at
             else view.next_change),
            ("sponsor", run.sponsor),
            ("syncer", run.syncer), ("spec cid", run.spec_cid), ("spec hash", hex32(run.spec_hash)),
            ("round", f"{run.current_round} of {run.max_rounds}"), ("deadline", when(run.round_deadline)),
            ("trainers (enrolled/M)", f"{run.enrolled_count}/{run.trainer_count}"),
            ("quorum K", run.quorum), ("fragments F", run.fragment_count), ("inner steps H", run.inner_steps),
            ("aggregation", run.aggregation_name), ("grace window", f"{run.grace_window_seconds} s"),
            ("min stake", amount(run.min_stake)), ("reward pool", amount(run.reward_pool)),
            ("pool left", amount(run.reward_pool_left)), ("stakes held", amount(run.stake_held)),
            ("total credits", view.total_credits),
            ("enrollment deadline", when(run.enrollment_deadline)),
            ("syncer fee", f"{run.syncer_fee_bps} bps of the pool"), ("syncer bond", amount(run.syncer_bond)),
            ("syncer fees accrued", amount(run.syncer_fees_accrued)),
            ("syncer elected at", when(run.syncer_elected_at)),
            ("syncer replaceable at", when(run.syncer_replaceable_at)),
            ("election requested at block", run.election_block or "-"),
            ("weights root", hex32(run.weights_root))]
    if view.commit_phase_closes_at:
        rows.append(("commit phase closes", when(view.commit_phase_closes_at)))
    if view.claimable_pool is not None:
        rows += [("claimable pool", amount(view.claimable_pool)), ("claimed", amount(view.claimed_total)),
                 ("claims close", when(view.claim_deadline or 0))]
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
            t.add_row(str(r.round), r.status, when(r.committed_at or 0), when(r.challenge_window_ends_at or 0),
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


@click.command("get-receipt")
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
        rows = [(k, when(v) if k == "sealed_at" else v) for k, v in out.items() if k != "serialized"]
        kv_table("training receipt", rows + [("serialized", f"{len(rec.serialized)} bytes")])


@click.command("cancel-task")
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


@click.command("close-enrollment")
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


@click.command("seal")
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
                                "claim_deadline": when(int(ev["claimDeadline"])), "tx": res.tx_hash})


@click.command("sweep")
@click.option("--task-id", required=True)
@format_option
@common_options
def sweep(ctx: Ctx, task_id: str, fmt: str) -> None:
    """Anyone, once a sealed run's claim period is over: credit what is left of its pool to the
    sponsor (unclaimed rewards, credit the syncer did not endorse and so left unpaid, the floor
    dust; collect it with `withdraw`)."""
    chain = ctx.chain(signer=True)
    res = chain.sweep(run_of(chain, task_id).task_id)
    ev = res.event("PoolSwept")
    tx_out(fmt, "pool swept to the sponsor", {"task_id": hex32(ev["taskId"]), "sponsor": ev["sponsor"],
                                               "amount": str(ev["amount"]),
                                               "amount_tokens": format_tokens(ev["amount"]), "tx": res.tx_hash})


@click.command("trainer-stats")
@click.option("--task-id", required=True)
@click.option("--trainer", default=None, help="address (default: the keystore's)")
@click.option("--atto", is_flag=True, help="amounts in exact atto-units instead of TNZO (JSON is always atto)")
@format_option
@common_options
def trainer_stats(ctx: Ctx, task_id: str, trainer: str | None, atto: bool, fmt: str) -> None:
    """Submitted / accepted / scored out (with reasons) / missed / credits / stake / slashed /
    reward (claimable and claimed) of one trainer (`tenzro_operator.views.run`;
    submitted and scored out come from the transcripts on IPFS: null when they cannot be read)."""
    from tenzro_operator.views.run import RunViewError, build

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


@click.command("verify-receipt")
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


def register(train: click.Group) -> None:
    """Attach ``post-task``, ``list-runs``, ``get-run``, ``get-receipt``, ``cancel-task``, ``close-enrollment``,
    ``seal``, ``sweep``, ``trainer-stats``, ``verify-receipt`` to the ``tenzro train`` group."""
    for command in (post_task, list_runs, get_run, get_receipt, cancel_task, close_enrollment, seal, sweep,
                    trainer_stats, verify_receipt):
        train.add_command(command)
