"""A trainer's reward, recomputed from the chain alone, with the working shown:
what ``tenzro train reward`` prints and what ``tenzro train claim`` sends.

The registry (contracts/PROTOCOL.md §5) stores only a Merkle root of the trainers'
cumulative credits. Each committed round's ``RoundCommitted`` event carries its accepted bitmaps;
trainer i earns ``fragment_sizes[f]`` credits for every bit f of its bitmap (``commitRound``'s
sum). The sum over the run's live rounds (a round discarded by a fraud proof and committed again
counts once, as committed again) must give the registry's credits root: that is what makes the
recomputation the chain's own figure, and the Merkle path of the trainer's leaf is ``claim``'s
proof. Credits the syncer accepted without endorsing them (``unendorsedBitmaps``: forced payloads
it found no work in) are kept apart in the word and paid only up to the endorsed ones (PROTOCOL.md §5
"Endorsed credit", `tenzro_operator.credits`). After ``sealRootRun`` the reward is
``claimable * paid_credits // totalCredits``
(``RootRunSealed.claimable``: the pool after the syncer's fees and the slashed bonds' shares);
after ``cancelStalledRun``, ``trainersPot`` (the committed rounds' share) takes the claimable's place.

Units: atto-units (1 TNZO = 10**18); credits in coordinates.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tenzro_operator.credits import bitmap_credits
from tenzro_operator.errors import TenzroError
from tenzro_operator.root_flow import RootFlowError, credits_proof
from tenzro_operator.views.run import build


@dataclass
class RewardReport:
    """One trainer's reward and how it follows from the chain.

    Attributes:
        per_round: ``(round, accepted bitmap, credits earned, unendorsed bitmap)`` for each live
            committed round.
        credits: every credit of its accepted submissions; ``unendorsed`` of them not endorsed;
            ``paid_credits`` what the claim pays on; ``credit_word`` its leaf (``claim``'s ``credits``).
        pool: the amount shared by credits: ``RootRunSealed.claimable`` once sealed (a stalled run's
            ``StalledRunCancelled.trainersPot`` once cancelled), else the pool left now (later rounds
            and fees still change it: ``sealed``, "claims are open", says which).
        reward: ``pool * paid_credits // total_credits`` (0 without credits).
        proof: the Merkle path of the trainer's credits leaf (``claim``'s proof).
    """

    trainer: str
    index: int
    per_round: list[tuple[int, int, int, int]]
    credits: int
    unendorsed: int
    paid_credits: int
    credit_word: int
    total_credits: int
    pool: int
    sealed: bool
    reward: int
    claimed: bool
    claimed_amount: int
    credits_root: bytes
    proof: list[bytes] = field(default_factory=list)


def reward_report(chain, task_id: bytes, trainer: str) -> RewardReport:
    """Recompute ``trainer``'s credits and reward in run ``task_id`` from the chain's events and
    getters (no IPFS, no key).

    Raises:
        TenzroError: not a root-flow run (`RunViewError`), or the trainer is not enrolled in it, or the recomputed credits do not give the registry's
            credits root (the chain or this reading disagrees: nothing should be claimed then).
    """
    view = build(chain, task_id, trainers=True)
    row = view.trainer(trainer)
    sizes = view.run.fragment_sizes
    per_round = []
    for x in view.rounds:
        if x.live and x.accepted_bitmaps is not None:
            bitmap = int(x.accepted_bitmaps[row.index])
            unendorsed = int(x.unendorsed_bitmaps[row.index]) if x.unendorsed_bitmaps else 0
            per_round.append((x.round, bitmap, bitmap_credits(bitmap, sizes), unendorsed))
    credits = [t.credit_word for t in sorted(view.trainers, key=lambda t: t.index)]
    root = chain.root_state(task_id)[2]
    try:
        proof = credits_proof(credits, row.index, root)
    except RootFlowError as exc:
        raise TenzroError(f"cannot recompute run 0x{task_id.hex()}'s credits: {exc}") from None
    sealed = view.claimable_pool is not None
    pool = view.claimable_pool if sealed else view.run.reward_pool_left
    if not sealed and view.run.status.name == "CANCELLED":  # a stalled run's cancel opens claims on its pot
        ev = chain.get_logs(chain.run_start_block(view.run), view.head_block, ["StalledRunCancelled"],
                            task_id=task_id)
        if ev:
            sealed, pool = True, int(ev[-1]["args"]["trainersPot"])
    total = view.total_credits
    return RewardReport(trainer=row.trainer, index=row.index, per_round=per_round, credits=row.credits,
                        unendorsed=row.unendorsed, paid_credits=row.paid_credits, credit_word=row.credit_word,
                        total_credits=total, pool=pool, sealed=sealed,
                        reward=pool * row.paid_credits // total if total else 0, claimed=row.claimed,
                        claimed_amount=row.claimed_reward, credits_root=root, proof=proof)


__all__ = ["RewardReport", "reward_report"]
