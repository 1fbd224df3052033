"""``tenzro train`` verbs of a trainer: ``enroll-trainer``, ``submit-gradient`` (the forced path:
commit, then reveal), ``reward`` (`tenzro_operator.views.reward`), ``claim`` and ``withdraw``.
Registered on the group by `tenzro_operator.cli.main`, which this module never imports."""

from __future__ import annotations

import hashlib
from pathlib import Path

import click

from tenzro_operator.cli.common import (
    Ctx, common_options, echo_json, format_option, hex32, kv_table, parse_did, run_of, tx_out, when,
)
from tenzro_operator.errors import TenzroError
from tenzro_operator.units import format_tokens, parse_tokens


@click.command("enroll-trainer")
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


@click.command("submit-gradient")
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
                                   "round": round_, "fragment": fragment, "reveal_after": when(chain.commit_phase(
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
            click.echo(f"committed; revealing once the commit phase closes ({when(closes)})", err=True)
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
                                  f"(it closes at {when(closes)} chain time)") from None


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


@click.command("reward")
@click.option("--task-id", required=True)
@click.option("--trainer", required=True, help="the trainer's address")
@click.option("--atto", is_flag=True, help="amounts in exact atto-units instead of TNZO (JSON is always atto)")
@format_option
@common_options
def reward(ctx: Ctx, task_id: str, trainer: str, atto: bool, fmt: str) -> None:
    """A trainer's reward in a run, recomputed from the chain alone and shown with its
    working: credits per committed round (fragment sizes of its accepted bitmap, and which the
    syncer did not endorse), the total, the pool they share, ``pool * paid // total`` (paid: the
    endorsed credits plus the unendorsed up to them, PROTOCOL.md §5 "Endorsed credit"), and whether
    the credits give the registry's credits root (`tenzro_operator.views.reward`). No key needed."""
    from tenzro_operator.views.reward import reward_report

    chain = ctx.chain()
    tid = run_of(chain, task_id).task_id
    rep = reward_report(chain, tid, trainer)  # RunViewError (a TenzroError): one line
    amount = (lambda a: f"{a} atto") if atto else format_tokens
    if fmt == "json":
        echo_json({"trainer": rep.trainer, "index": rep.index, "credits": str(rep.credits),
                    "unendorsed_credits": str(rep.unendorsed), "paid_credits": str(rep.paid_credits),
                    "total_credits": str(rep.total_credits), "pool": str(rep.pool), "sealed": rep.sealed,
                    "reward": str(rep.reward), "claimed": rep.claimed, "claimed_amount": str(rep.claimed_amount),
                    "credits_root": hex32(rep.credits_root),
                    "rounds": [{"round": r, "accepted_bitmap": b, "credits": str(c), "unendorsed_bitmap": u}
                               for r, b, c, u in rep.per_round]})
        return
    rows = [(f"round {r}", f"bitmap {b:#b}: {c:,} credits" + (f" (not endorsed: {u:#b})" if u else ""))
            for r, b, c, u in rep.per_round]
    pool_is = "claimable after the seal" if rep.sealed else "pool left now (not sealed: fees and later rounds change it)"
    rows += [("credits", f"{rep.credits:,} of {rep.total_credits:,} (the registry's credits root "
                         f"{hex32(rep.credits_root)[:18]}… checks out)")]
    if rep.unendorsed:
        rows += [("not endorsed", f"{rep.unendorsed:,}: paid only up to the endorsed {rep.credits - rep.unendorsed:,}, "
                                  f"so {rep.paid_credits:,} are paid")]
    rows += [("pool", f"{amount(rep.pool)} ({pool_is})"),
             ("reward", f"{amount(rep.reward)} = pool x {rep.paid_credits:,} / {rep.total_credits:,}"),
             ("claimed", f"yes: {amount(rep.claimed_amount)}" if rep.claimed else
              ("no: `tenzro train claim` (anyone may)" if rep.sealed else "no: claims open at the seal"))]
    kv_table(f"reward of trainer {rep.index} ({rep.trainer})", rows)


@click.command("claim")
@click.option("--task-id", required=True)
@click.option("--trainer", default=None, help="the trainer to claim for (anyone may; the reward goes to the "
                                               "trainer) [default: the keystore's account]")
@format_option
@common_options
def claim(ctx: Ctx, task_id: str, trainer: str | None, fmt: str) -> None:
    """After the seal: ``claim`` a trainer's reward with the Merkle proof of its credits
    (recomputed from the chain, `tenzro train reward` shows how); the reward becomes withdrawable
    by the trainer (`tenzro train withdraw`)."""
    from tenzro_operator.views.reward import reward_report

    chain = ctx.chain(signer=trainer is None)  # with --trainer the key is unlocked only to send
    tid = run_of(chain, task_id).task_id
    rep = reward_report(chain, tid, trainer or chain.address)  # RunViewError (a TenzroError): one line
    if not rep.sealed:
        raise TenzroError(f"run {task_id} is not sealed yet: claims open at the seal (`tenzro train get-run` "
                          "says when); nothing was sent")
    if rep.claimed:
        raise TenzroError(f"trainer {rep.index} ({rep.trainer}) has claimed already: "
                          f"{format_tokens(rep.claimed_amount)}; nothing was sent")
    if rep.paid_credits == 0:
        raise TenzroError(f"trainer {rep.index} ({rep.trainer}) has no paid credits in this run "
                          f"({rep.credits:,} credited, {rep.unendorsed:,} of them not endorsed): nothing to claim")
    if trainer is not None:
        chain = ctx.chain(signer=True)
    res = chain.claim_reward(tid, rep.index, rep.credit_word, rep.proof)
    ev = res.event("RewardClaimed")
    tx_out(fmt, "reward claimed", {"trainer": ev["trainer"], "index": ev["index"], "credits": str(ev["credits"]),
                                    "reward": str(ev["reward"]), "reward_tokens": format_tokens(ev["reward"]),
                                    "tx": res.tx_hash})


@click.command("withdraw")
@format_option
@common_options
def withdraw(ctx: Ctx, fmt: str) -> None:
    """Pull rewards, refunds and released stake credited to the keystore's account."""
    chain = ctx.chain(signer=True)
    res = chain.withdraw()
    amount = res.event("Withdrawn")["amount"]
    tx_out(fmt, "withdrawn", {"account": chain.address, "amount": str(amount),
                               "amount_tokens": format_tokens(amount), "tx": res.tx_hash})


def register(train: click.Group) -> None:
    """Attach ``enroll-trainer``, ``submit-gradient``, ``reward``, ``claim``, ``withdraw`` to the ``tenzro train`` group."""
    for command in (enroll_trainer, submit_gradient, reward, claim, withdraw,):
        train.add_command(command)
