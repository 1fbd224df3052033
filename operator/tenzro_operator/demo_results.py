"""What the demo (`tenzro_operator.demo`) reads back from the chain and IPFS once its run is
sealed: the global weights after every round, one row per trainer and the run's token
accounting.

A run (contracts/PROTOCOL.md §5) records one ``RoundCommitted`` event a round with an accepted bitmap per trainer: accepted work
and credits are summed from those bitmaps (`tenzro_operator.root_flow.committed_rounds`,
`cumulative_credits`), rewards are the trainers' ``RewardClaimed`` claims after the seal, and
what nobody claims (the floor dust) stays in the registry for the sponsor's ``sweep``.

Usage::

    states = round_weights(chain, ipfs, runtime, task_id, spec, posted_block)   # [initial, after r0, ...]
    rows = trainer_rows(chain, task_id, posted_block, role_of)
    acct = accounting(chain, task_id, posted_block, sponsor, [syncer], syncer_stake_in)  # acct["conserved"]
"""

from __future__ import annotations

from collections.abc import Sequence

from tenzro_operator.chain import ChainClient
from tenzro_operator.credits import credit_halves, paid_credits
from tenzro_operator.ipfs import IpfsClient
from tenzro_operator.root_flow import committed_rounds, committed_weights, cumulative_credits
from tenzro_operator.task_assets import fetch_weights, initial_weights
from tenzro_operator.task_runtime import TaskRuntime

__all__ = ["accounting", "round_weights", "trainer_rows", "unclaimed_credits"]

TOKEN = 10**18  # atto-units per TNZO


def _events(chain: ChainClient, task_id: bytes, from_block: int, name: str) -> list[dict]:
    return chain.get_logs(from_block, chain.block_number(), [name], task_id=task_id)


def round_weights(chain: ChainClient, ipfs: IpfsClient, runtime: TaskRuntime, task_id: bytes, spec,
                  from_block: int) -> list[dict]:
    """Global weights after every round (index 0 = initial), fetched from IPFS and checked against
    their hashes and the committed weights root (the transcript each round's last
    ``RoundCommitted`` names)."""
    run = chain.get_run(task_id)
    states = [initial_weights(ipfs, spec, runtime, run.initial_weights_root)[0]]
    for _, ev in sorted(committed_rounds(chain, task_id, from_block, run.max_rounds).items()):
        cids, hashes = committed_weights(ipfs, ev)
        states.append(fetch_weights(ipfs, runtime, cids, hashes, bytes(ev["weightsRoot"]), chunk_roots=True)[0])
    return states


def _root_work(chain: ChainClient, task_id: bytes, from_block: int) -> tuple[list[int], list[int]]:
    """Per trainer index, (accepted fragment submissions, cumulative credits word) over the
    committed rounds' bitmaps (`tenzro_operator.credits`)."""
    run = chain.get_run(task_id)
    rounds = committed_rounds(chain, task_id, from_block, run.max_rounds)
    n = len(chain.trainers_of(task_id))
    accepted = [sum(bin(int(ev["acceptedBitmaps"][i])).count("1") for ev in rounds.values()) for i in range(n)]
    return accepted, cumulative_credits(rounds, run.fragment_sizes, n)


def _claims(chain: ChainClient, task_id: bytes, from_block: int) -> dict[str, int]:
    """Trainer (lower-case) -> atto-units claimed (``RewardClaimed``)."""
    return {e["args"]["trainer"].lower(): int(e["args"]["reward"])
            for e in _events(chain, task_id, from_block, "RewardClaimed")}


def unclaimed_credits(chain: ChainClient, task_id: bytes, from_block: int) -> list[str]:
    """The trainers (addresses) with paid credits that have not claimed their reward yet."""
    _, credits = _root_work(chain, task_id, from_block)
    claimed = _claims(chain, task_id, from_block)
    return [t for t, c in zip(chain.trainers_of(task_id), credits) if paid_credits(c) and t.lower() not in claimed]


def trainer_rows(chain: ChainClient, task_id: bytes, from_block: int, role_of: dict[str, str]) -> list[dict]:
    """One row per enrolled trainer, in index order: accepted fragment submissions, credits (and
    how many of them the syncer did not endorse), reward, slashed and withdrawable (TNZO).
    ``role_of`` maps lower-case addresses to the demo's role names."""
    accepted, credits = _root_work(chain, task_id, from_block)
    claims = _claims(chain, task_id, from_block)
    rows = []
    for i, addr in enumerate(chain.trainers_of(task_id)):
        st = chain.trainer_stats(task_id, addr)
        endorsed, unendorsed = credit_halves(credits[i])
        rows.append({"trainer": role_of.get(addr.lower(), addr), "address": addr,
                     "accepted": accepted[i], "credits": endorsed + unendorsed, "unendorsed": unendorsed,
                     "reward_tnzo": claims.get(addr.lower(), 0) / TOKEN,
                     "slashed_tnzo": st.slashed / TOKEN, "withdrawable_tnzo": chain.withdrawable(addr) / TOKEN})
    return rows


def accounting(chain: ChainClient, task_id: bytes, from_block: int, sponsor: str, syncers: Sequence[str],
               syncer_stake_in: int) -> dict:
    """The run's token accounting from the chain (atto-units), exact.

    In: the reward pool, the trainers' stakes, the syncer's pool stake before the run. Out: the
    trainers' rewards (``RewardClaimed``), their stake refunds (``PayoutCredited`` at the seal),
    the dust left to the sponsor (what no claim took, the floor remainder the sponsor sweeps after
    the claim period, and any the seal credited it), the syncer fees the run accrued (``syncerFeesAccrued``), the stake burned by slashes
    (``StakeBurned``), the provers' bounties (``RoundProvenWrong`` against a syncer,
    ``InvalidProven`` against a trainer, an expired availability challenge included; none in an
    honest run) and the
    pool stake the run's ``syncers`` (addresses; ``syncer_stake_in``: theirs before the run, in
    total) still have registered. ``conserved`` is ``in == out``.
    """
    run = chain.get_run(task_id)
    ev = lambda name: _events(chain, task_id, from_block, name)  # noqa: E731
    payouts = ev("PayoutCredited")
    claimed = sum(_claims(chain, task_id, from_block).values())
    claimable = sum(int(e["args"]["claimable"]) for e in ev("RootRunSealed"))  # the pool open to claims
    sponsor = sponsor.lower()
    a = {
        "pool": run.reward_pool,
        "stakes": sum(chain.trainer_stats(task_id, t).stake for t in chain.trainers_of(task_id)),
        "syncer_stake_in": syncer_stake_in,
        "rewards": claimed + sum(p["args"]["reward"] for p in payouts if p["args"]["account"].lower() != sponsor),
        "dust": (claimable - claimed) + sum(p["args"]["reward"] for p in payouts
                                            if p["args"]["account"].lower() == sponsor),
        "refunds": sum(p["args"]["stakeRefund"] for p in payouts),
        "syncer_fees": run.syncer_fees_accrued,
        "burned": sum(b["args"]["amount"] for b in ev("StakeBurned")),
        "bounties": sum(int(p["args"]["bounty"]) for p in ev("RoundProvenWrong") + ev("InvalidProven")),
        "syncer_stake_out": sum(chain.syncer_info(s).stake for s in syncers),
    }
    a["in"] = a["pool"] + a["stakes"] + a["syncer_stake_in"]
    a["out"] = (a["rewards"] + a["refunds"] + a["syncer_fees"] + a["dust"] + a["burned"] + a["bounties"]
                + a["syncer_stake_out"])
    a["conserved"] = a["in"] == a["out"]
    return a
