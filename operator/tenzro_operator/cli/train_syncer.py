"""``tenzro train`` verbs of a syncer: ``register-syncer``, ``unregister-syncer``, ``elect-syncer``,
``finalize-round`` (``commitRound`` by hand) and ``claim-syncer-fee``. Registered on the group by
`tenzro_operator.cli.main`, which this module never imports."""

from __future__ import annotations

import json
from pathlib import Path

import click

from tenzro_operator.cli.common import Ctx, common_options, format_option, hex32, parse_task_id, tx_out
from tenzro_operator.errors import TenzroError
from tenzro_operator.units import format_tokens, parse_tokens


@click.command("finalize-round")
@click.option("--commit", "commit_path", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="JSON: task_id, round, fragments_root, accepted_bitmaps, previous_credits, fragment_hashes, "
                   "transcript_hash, transcript_cid and, optionally, unendorsed_bitmaps")
@format_option
@common_options
def finalize_round(ctx: Ctx, commit_path: Path, fmt: str) -> None:
    """(Syncer, by hand) commit the open round by root (``commitRound``, contracts/PROTOCOL.md §5)
    from a JSON file: the fragments root, one accepted bitmap and the cumulative credits word before
    the round per trainer index, the F fragment hashes (the new weights' §2 roots), the transcript's
    sha256 and CID, and optionally one unendorsed bitmap per trainer index (accepted submissions it
    found no work in, §5 "Endorsed credit"). The syncer daemon does this itself; this is for when it
    cannot."""
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
                    transcript_hash=b32(doc["transcript_hash"]), transcript_cid=str(doc["transcript_cid"]),
                    unendorsed_bitmaps=ints("unendorsed_bitmaps") if "unendorsed_bitmaps" in doc else [])
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise TenzroError(f"{commit_path}: not a round commit ({type(exc).__name__}: {exc})") from None
    chain = ctx.chain(signer=True)
    res = chain.commit_round(**args)
    ev = res.event("RoundCommitted")
    tx_out(fmt, "round committed", {"round": ev["round"], "weights_root": hex32(ev["weightsRoot"]),
                                     "credits_root": hex32(ev["creditsRoot"]), "total_credits": str(ev["totalCredits"]),
                                     "tx": res.tx_hash, "gas": res.gas_used})


@click.command("register-syncer")
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


@click.command("unregister-syncer")
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


@click.command("elect-syncer")
@click.option("--task-id", required=True)
@format_option
@common_options
def elect_syncer(ctx: Ctx, task_id: str, fmt: str) -> None:
    """Anyone: elect a syncer for a Training run that has none, or replace one that became
    replaceable (its bond is burned). Two transactions: requestSyncerElection, then electSyncer
    from the next block (whose hash of the request block seeds the stake-weighted draw)."""
    chain = ctx.chain(signer=True)
    tx_out(fmt, "syncer elected", {"syncer": chain.run_syncer_election(parse_task_id(task_id))})


@click.command("claim-syncer-fee")
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


def register(train: click.Group) -> None:
    """Attach ``finalize-round``, ``register-syncer``, ``unregister-syncer``, ``elect-syncer``, ``claim-syncer-fee`` to the ``tenzro train`` group."""
    for command in (finalize_round, register_syncer, unregister_syncer, elect_syncer, claim_syncer_fee,):
        train.add_command(command)
