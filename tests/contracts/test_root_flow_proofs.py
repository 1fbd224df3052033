"""Fraud proofs of the aggregate in the root flow (contracts/PROTOCOL.md §5 build step 3, §6),
on ape-foundry's anvil with the via-IR build: real pseudo-gradients, signed by the trainers'
keys (EIP-712), aggregated and stepped with ``tenzro_trainer.canonical`` exactly as the syncer
does, committed with ``commitRound``; proofs built with ``tenzro_trainer.round_commitment``.

- An honest commit survives a proof at every coordinate tried (``Registry__NoMismatch``).
- A syncer that commits one wrong bit at one coordinate is proven wrong: it loses its bond (10 %
  to the prover, the rest burned), its fee for the discarded round goes back to the pool, the
  run goes back to the round before, and a new syncer must be elected.
- A proof with a forged signature, with roots other than the committed ones, for a round not
  committed, or after the round's window is refused.
- Bitmaps that deny an accepted trainer its credit are proven wrong against the fragment's
  accepted set (``proveBitmap``), and a live forced submission left out is proven omitted
  (``proveOmission``), with the same slash and rewind.
"""

from __future__ import annotations

from dataclasses import dataclass

import ape
from eth_utils import keccak
import pytest
import torch
from registry_helpers import (CHALLENGE_S, E18, ELECTION_WINDOW_BLOCKS, MIN_STAKE, as_tuple, fee_per_round, params, prove_committed, sha,
                              to_reveal_phase)

from tenzro_operator import receipt
from tenzro_trainer import canonical
from tenzro_trainer import round_commitment as rc
from tenzro_trainer.commitment import ChunkTree

SIZES = [40, 24]  # values per fragment: 3 and 2 chunks of 16
M = 3
LR, MU = 0.7, 0.9
ZERO_ROOTS = (bytes(32), bytes(32), 0, bytes(32))
BOUNTY_BPS, BPS = 1_000, 10_000


@dataclass
class Round:
    """One committed round as its syncer built it."""

    states: list  # rc.FragmentState per fragment
    vecs: list  # (weights, momentum) float32 tensors per fragment
    subs: dict  # {fragment: {trainer index: rc.OuterGradient}}
    payloads: dict  # {fragment: {trainer index: float32 pseudo-gradient}}
    sigs: dict  # {(fragment, trainer index): signature bytes}
    roots: tuple  # RoundRoots: the preimage of the round's commitment word
    weights_root: bytes  # RunRoot weights root after the round

    @property
    def leaves(self) -> list:
        return [s.leaf for s in self.states]


def _flip(w: torch.Tensor, c: int) -> torch.Tensor:
    bits = w.clone().view(torch.int32)
    bits[c] ^= 1
    return bits.view(torch.float32)


def _commit(ctx, rnd: int, prev: Round, flip: tuple[int, int] | None = None, bitmaps: list[int] | None = None,
            exclude: frozenset = frozenset()) -> Round:
    """Every trainer submits every fragment off-chain; the syncer aggregates with the task's rule
    (TrimmedMean, no trim) all but the (fragment, trainer index) pairs in ``exclude``, applies
    Nesterov and commits; ``flip`` = (fragment, coordinate) of a weight whose last bit it flips
    before committing; ``bitmaps`` = the accepted bitmaps it commits instead of the true ones."""
    reg, task, g = ctx["reg"], ctx["task"], ctx["g"]
    base = bytes(reg.getRun(task).weightsRoot)
    states, vecs, subs, payloads, sigs = [], [], {}, {}, {}
    for f, n in enumerate(SIZES):
        subs[f], payloads[f] = {}, {}
        for i, t in enumerate(ctx["trainers"]):
            if (f, i) in exclude:
                continue
            p = (torch.randn(n, generator=g) * 0.01).float()
            root, sumsq = ChunkTree(p).root
            cid, ph = f"bafyr{rnd}f{f}t{i}", sha(f"payload {rnd} {f} {i}")
            sigs[(f, i)] = bytes(ctx["sign"](t, task, rnd, f, (root, sumsq, cid, ph))[4])
            subs[f][i] = rc.OuterGradient(task, rnd, f, base, root, sumsq, cid, ph)
            payloads[f][i] = p
        agg = canonical.trimmed_mean(torch.stack([payloads[f][i] for i in sorted(payloads[f])]), 0)
        pw, pm = prev.vecs[f]
        w, m = canonical.nesterov_step(pw, pm, agg, LR, MU, True)
        if flip is not None and flip[0] == f:
            w = _flip(w, flip[1])
        vecs.append((w, m))
        states.append(rc.FragmentState.build(f, w, m, rc.AcceptedSet({i: s.struct_hash() for i, s in subs[f].items()},
                                                                     M)))
    fragments_root = rc.fragments_root([s.leaf for s in states])
    bitmaps = bitmaps or [sum(1 << f for f in range(len(SIZES)) if (f, i) not in exclude) for i in range(M)]
    previous = list(ctx["credits"])
    to_reveal_phase(reg, task)
    # fragmentHashes: each fragment's §2 weights root (the receipt names the weights proofs open)
    reg.commitRound((task, rnd, fragments_root, bitmaps, previous,
                     [s.leaf.weights_root for s in states], sha(f"transcript {rnd}"), f"bafyt{rnd}", []),
                    sender=ctx["roles"].syncer)
    ctx["credits"] = [c + sum(n for f, n in enumerate(SIZES) if b >> f & 1) for c, b in zip(previous, bitmaps)]
    credits = rc.credits_tree(ctx["credits"])
    assert bytes(reg.rootState(task)[2]) == credits.root  # the registry's sums are these
    roots = (fragments_root, credits.root, sum(ctx["credits"]), rc.bitmaps_hash(bitmaps))
    return Round(states, vecs, subs, payloads, sigs, roots, bytes(reg.getRun(task).weightsRoot))


def _proof(ctx, rnd: int, cur: Round, prev: Round, f: int, c: int) -> tuple:
    """The arguments of proveAggregate for (fragment f, coordinate c) of round rnd."""
    o = rc.build_aggregate_opening(fragment=f, coordinate=c, current=cur.states[f], previous=prev.states[f],
                                   current_leaves=cur.leaves, previous_leaves=prev.leaves,
                                   submissions=cur.subs[f], payloads=cur.payloads[f])
    sigs = [cur.sigs[(f, e.trainer_index)] for e in o.entries]
    previous = ZERO_ROOTS if rnd == 0 else prev.roots
    return (ctx["task"], rnd, cur.roots, previous, bytes(32) if rnd == 0 else prev.weights_root), o.as_tuple(), sigs


def _start(reg, fund, elect, sign, roles, name: str, challenge_s: int = CHALLENGE_S) -> dict:
    """A 3-trainer, 2-fragment, 3-round root-flow run (TrimmedMean without trim, Nesterov 0.7 /
    0.9), enrolled and with its syncer elected (its stake topped up first: another run's proof may
    have cost the only candidate a bond), rounds challengeable for ``challenge_s`` seconds;
    returns the test's context."""
    fund(roles.syncer, 10 * E18)
    ape.chain.mine(ELECTION_WINDOW_BLOCKS + 1)  # a top-up waits out the draws its last change may be in
    reg.registerSyncer(10 * E18, sender=roles.syncer)
    p = params(name, trainerCount=M, quorum=2, fragmentCount=len(SIZES), maxRounds=3, fragmentSizes=SIZES,
               challengeSeconds=challenge_s)
    fund(roles.sponsor, p["rewardPool"])
    reg.postTask(as_tuple(p), sender=roles.sponsor)
    task = p["taskId"]
    g = torch.Generator().manual_seed(8)
    w0 = [(torch.randn(n, generator=g) * 0.05).float() for n in SIZES]
    initial = Round([rc.FragmentState.initial(f, w) for f, w in enumerate(w0)],
                    [(w, torch.zeros_like(w)) for w in w0], {}, {}, {}, ZERO_ROOTS, p["initialWeightsRoot"])
    reg.useRootFlow(task, rc.fragments_root(initial.leaves), (rc.f32_bits(LR), rc.f32_bits(MU), True, 0),
                    sender=roles.sponsor)
    for t in roles.trainers[:M]:
        fund(t, MIN_STAKE)
        reg.enrollTrainer(task, MIN_STAKE, "did:tenzro:t", sender=t)
    elect(task)
    order = [a.lower() for a in reg.trainersOf(task)]
    trainers = sorted(roles.trainers[:M], key=lambda t: order.index(t.address.lower()))
    return {"reg": reg, "task": task, "g": g, "trainers": trainers, "sign": sign, "roles": roles, "params": p,
            "initial": initial, "credits": [0] * M}


@pytest.fixture(scope="module")
def ctx(full_registry, fund, elect, sign, syncer_pool, roles):
    """Round 0 committed honestly, round 1 with one flipped bit at fragment 1, coordinate 5; a
    2-minute challenge window, so that round 0's is still open after round 1's commit phase."""
    c = _start(full_registry, fund, elect, sign, roles, "root-proofs", challenge_s=120)
    c["r0"] = _commit(c, 0, c["initial"])
    c["r1"] = _commit(c, 1, c["r0"], flip=(1, 5))
    return c


def test_an_honest_round_survives_proofs_at_every_coordinate_tried(ctx):
    reg, r0 = ctx["reg"], ctx["r0"]
    for f, n in enumerate(SIZES):
        for c in sorted({0, 1, 15, 16, n // 2, n - 1}):
            a, o, sigs = _proof(ctx, 0, r0, ctx["initial"], f, c)
            with ape.reverts(reg.Registry__NoMismatch):
                reg.proveAggregate(a, o, sigs, sender=ctx["roles"].stranger)
    # the flipped round is right everywhere else too
    a, o, sigs = _proof(ctx, 1, ctx["r1"], r0, 1, 6)
    with ape.reverts(reg.Registry__NoMismatch):
        reg.proveAggregate(a, o, sigs, sender=ctx["roles"].stranger)


def test_a_proof_needs_the_trainers_signatures_and_the_committed_roots(ctx):
    reg, r0, r1, stranger = ctx["reg"], ctx["r0"], ctx["r1"], ctx["roles"].stranger
    a, o, sigs = _proof(ctx, 1, r1, r0, 1, 5)
    forged = [sigs[1]] + sigs[1:]  # entry 0 carrying trainer 1's signature
    with ape.reverts(reg.Registry__NotSignedBy):
        reg.proveAggregate(a, o, forged, sender=stranger)
    with ape.reverts(reg.Registry__SignatureCount):
        reg.proveAggregate(a, o, sigs[:-1], sender=stranger)
    wrong = (a[0], a[1], (a[2][0], a[2][1], a[2][2] + 1, a[2][3]), a[3], a[4])
    with ape.reverts(reg.Registry__WrongRoots):
        reg.proveAggregate(wrong, o, sigs, sender=stranger)
    wrong = (a[0], a[1], a[2], a[3], sha("not the weights after round 0"))
    with ape.reverts(reg.Registry__WrongRoots):
        reg.proveAggregate(wrong, o, sigs, sender=stranger)
    with ape.reverts(reg.Registry__RoundNotCommitted):
        reg.proveAggregate((a[0], 2, a[2], a[3], a[4]), o, sigs, sender=stranger)


def test_one_wrong_bit_costs_the_syncer_its_bond_and_rewinds_the_run(ctx, chain):
    reg, task, roles, p = ctx["reg"], ctx["task"], ctx["roles"], ctx["params"]
    syncer = roles.syncer
    stake_before = reg.syncerInfo(syncer)[0]
    fee_before = reg.syncerFeeOf(task, syncer)
    pool_before = reg.getRun(task).rewardPoolLeft
    bounty_before = reg.withdrawable(roles.stranger)
    burned_before = reg.burned()
    a, o, sigs = _proof(ctx, 1, ctx["r1"], ctx["r0"], 1, 5)
    tx = prove_committed(reg, "proveAggregate", a, o, sigs, sender=roles.stranger)
    print(f"gas proveAggregate (M = 3, F = 2, n = 24, 3 entries): {tx.gas_used}")
    print(f"gas commitProof (its bounty's commitment, a new word): "
          f"{reg.commitProof(keccak(b'another proof'), sender=roles.stranger).gas_used}")
    bond = p["syncerBond"]
    bounty = bond * BOUNTY_BPS // BPS
    ev = tx.decode_logs(reg.RoundProvenWrong)[0]
    assert (ev.round, ev.kind, ev.fragment, ev.position, ev.syncer, ev.slashed, ev.bounty) == (
        1, 1, 1, 5, syncer.address, bond, bounty)
    assert reg.syncerInfo(syncer)[0] == stake_before - bond
    assert reg.withdrawable(roles.stranger) - bounty_before == bounty
    assert reg.burned() - burned_before == bond - bounty
    fee = fee_per_round(p["rewardPool"], p["syncerFeeBps"], p["maxRounds"])
    assert reg.syncerFeeOf(task, syncer) == fee_before - fee  # round 1's fee back to the pool
    v = reg.getRun(task)
    assert v.rewardPoolLeft == pool_before + fee
    assert (v.status, v.currentRound, v.syncer) == (2, 1, "0x" + "00" * 20)  # Training round 1, no syncer
    assert bytes(v.weightsRoot) == ctx["r0"].weights_root and v.totalCredits == ctx["r0"].roots[2]
    assert bytes(reg.rootState(task)[2]) == ctx["r0"].roots[1]  # credits back to round 0's
    assert bytes(reg.roundCommitment(task, 1)) != bytes(32)  # kept until round 1 is committed again
    # a racing second proof of the discarded round finds nothing to prove
    with ape.reverts(reg.Registry__RoundNotCommitted):
        reg.proveAggregate(a, o, sigs, sender=roles.relayer)
    # round 0 stays final once its window has passed
    chain.mine(deltatime=p["challengeSeconds"] + 1)
    a0, o0, s0 = _proof(ctx, 0, ctx["r0"], ctx["initial"], 0, 0)
    with ape.reverts(reg.Registry__ChallengeWindowClosed):
        reg.proveAggregate(a0, o0, s0, sender=roles.stranger)
    # the run goes on: anyone requests a new election at once
    reg.requestSyncerElection(task, sender=roles.stranger)


def _bitmap_opening(rnd: Round, bitmaps: list[int], f: int, i: int) -> tuple:
    leaf = rnd.states[f].leaf
    return (bitmaps, f, i, leaf.as_tuple(), rc.fragments_tree(rnd.leaves).path(f), rnd.states[f].accepted.slot(i),
            rnd.states[f].accepted.path(i))


def test_bitmaps_that_deny_an_accepted_trainer_its_credit_are_proven_wrong(full_registry, fund, elect, sign, roles,
                                                                         syncer_pool):
    """The syncer aggregates all three trainers on fragment 1 (its accepted set holds them) but
    commits a bitmap that leaves trainer 2's fragment 1 out (its credit to nobody): a bitmap
    proof at trainer 2 (filled slot, clear bit; 2 bits against the leaf's count of 3) convicts
    it; proofs on fragment 0, where bitmaps and accepted set agree, prove nothing."""
    reg = full_registry
    c = _start(reg, fund, elect, sign, roles, "root-bitmaps")
    full = (1 << len(SIZES)) - 1
    lie = [full, full, full & ~0b10]  # trainer 2 not credited for fragment 1
    r0 = _commit(c, 0, c["initial"], bitmaps=lie)
    claim = (c["task"], 0, r0.roots, ZERO_ROOTS, bytes(32))
    for i in range(M):  # fragment 0's bitmaps and accepted set agree
        with ape.reverts(reg.Registry__NoMismatch):
            reg.proveBitmap(claim, _bitmap_opening(r0, lie, 0, i), sender=roles.stranger)
    with ape.reverts(reg.Registry__WrongRoots):  # not the committed bitmaps
        reg.proveBitmap(claim, _bitmap_opening(r0, [full] * M, 1, 2), sender=roles.stranger)
    bad_path = list(_bitmap_opening(r0, lie, 1, 2))
    bad_path[6] = [sha("not a sibling")] * len(bad_path[6])
    with ape.reverts(reg.Registry__BadLeaf):
        reg.proveBitmap(claim, tuple(bad_path), sender=roles.stranger)
    syncer = reg.getRun(c["task"]).syncer
    stake_before = reg.syncerInfo(syncer)[0]
    tx = reg.proveBitmap(claim, _bitmap_opening(r0, lie, 1, 2), sender=roles.stranger)
    ev = tx.decode_logs(reg.RoundProvenWrong)[0]
    assert (ev.round, ev.kind, ev.fragment, ev.position, ev.syncer) == (0, 2, 1, 2, syncer)
    assert reg.syncerInfo(syncer)[0] == stake_before - c["params"]["syncerBond"]
    v = reg.getRun(c["task"])
    assert (v.currentRound, v.totalCredits) == (0, 0) and bytes(reg.rootState(c["task"])[2]) == bytes(32)
    print(f"gas proveBitmap (M = 3, F = 2): {tx.gas_used}")


def _force_commit(c, rnd: int, f: int, i: int) -> tuple:
    """Trainer i's forced submission of fragment f in round rnd, signed over the run's weights now,
    committed on-chain (``commitSubmission``, commit phase). Returns (the signed payload tuple to
    reveal with ``submitOuterGradient`` after the phase, the commitment's receipt)."""
    reg, task, trainer = c["reg"], c["task"], c["trainers"][i]
    p = (torch.randn(SIZES[f], generator=c["g"]) * 0.01).float()
    root, sumsq = ChunkTree(p).root
    fields = (root, sumsq, f"bafyforced{rnd}{f}{i}", sha(f"forced {rnd} {f} {i}"))
    sh = rc.OuterGradient(task, rnd, f, bytes(reg.getRun(task).weightsRoot), *fields).struct_hash()
    tx = reg.commitSubmission(task, rnd, f, rc.forced_commitment(sh, trainer.address), sender=trainer)
    return c["sign"](trainer, task, rnd, f, fields), tx


def test_a_live_forced_submission_left_out_is_proven_and_a_settled_one_is_not(full_registry, fund, elect, sign, roles,
                                                                               chain, syncer_pool):
    """Two trainers force a submission on-chain (the forced-inclusion path: a commitment in the
    commit phase, the reveal after it). The syncer challenges
    one for availability; it may not commit while the challenge is pending; nobody answers, the
    challenge expires, the submission is rejected. The syncer then leaves both out: leaving out
    the rejected one proves nothing, leaving out the live one convicts it (kind 3)."""
    reg = full_registry
    c = _start(reg, fund, elect, sign, roles, "root-omission")
    task, trainers = c["task"], c["trainers"]
    forced = {}
    for f, i in ((1, 2), (0, 1)):
        forced[(f, i)], tx = _force_commit(c, 0, f, i)
    with ape.reverts(reg.Registry__CommitPhaseOpen):  # nothing is shown before the phase closes
        reg.submitOuterGradient(task, 0, 1, forced[(1, 2)], sender=roles.relayer)
    to_reveal_phase(reg, task)
    for f, i in forced:
        reveal = reg.submitOuterGradient(task, 0, f, forced[(f, i)], sender=roles.relayer)
    print(f"gas forced path (M = 3, F = 2): commitSubmission {tx.gas_used}, reveal {reveal.gas_used}")
    fund(roles.syncer, reg.challengeBond(task))
    reg.challengeAvailability(task, 0, 1, trainers[2], forced[(1, 2)], 0, sender=roles.syncer)
    with ape.reverts(reg.Registry__ChallengesPending):
        _commit(c, 0, c["initial"], exclude=frozenset({(1, 2), (0, 1)}))
    chain.mine(deltatime=CHALLENGE_S + 1)
    reg.expireAvailability(task, 0, 1, trainers[2], sender=roles.stranger)
    c["credits"] = [0] * M
    r0 = _commit(c, 0, c["initial"], exclude=frozenset({(1, 2), (0, 1)}))
    claim = (task, 0, r0.roots, ZERO_ROOTS, bytes(32))
    bitmaps = [0b11, 0b10, 0b01]
    assert rc.bitmaps_hash(bitmaps) == r0.roots[3]
    for f, i in ((1, 2), (0, 0), (1, 1)):  # rejected; never forced; accepted
        with ape.reverts(reg.Registry__NoMismatch):
            reg.proveOmission(claim, bitmaps, f, i, sender=roles.stranger)
    syncer = reg.getRun(task).syncer
    tx = reg.proveOmission(claim, bitmaps, 0, 1, sender=roles.stranger)
    ev = tx.decode_logs(reg.RoundProvenWrong)[0]
    assert (ev.round, ev.kind, ev.fragment, ev.position, ev.syncer) == (0, 3, 0, 1, syncer)
    assert reg.getRun(task).currentRound == 0 and reg.getRun(task).syncer == "0x" + "00" * 20
    print(f"gas proveOmission (M = 3, F = 2): {tx.gas_used}")


def test_a_forced_submission_of_a_discarded_opening_cannot_convict_the_next_syncer(full_registry, fund, elect, sign,
                                                                                   roles, syncer_pool):
    """Attack: round 0 is committed with one wrong bit; before anyone proves it, trainer 1 forces
    its round-1 submission of fragment 0 on-chain, signed over round 0's wrong weights. The proof
    discards round 0, and round 1's opening with it. The syncer elected next commits round 0 and
    round 1 honestly, without that submission (signed over weights that are no longer the run's,
    it cannot be used): ``proveOmission`` of it in round 1 proves nothing (a discarded opening's
    submissions are kept apart), and in round 1's new opening trainer 1 has no submission, so it
    may force one again."""
    reg = full_registry
    c = _start(reg, fund, elect, sign, roles, "root-stale-forced", challenge_s=120)
    task, trainer = c["task"], c["trainers"][1]
    r0 = _commit(c, 0, c["initial"], flip=(1, 5))
    stale, _ = _force_commit(c, 1, 0, 1)
    to_reveal_phase(reg, task)
    reg.submitOuterGradient(task, 1, 0, stale, sender=roles.relayer)
    assert reg.submissionsOf(task, 1, trainer)[0] == 0b01
    a, o, sigs = _proof(c, 0, r0, c["initial"], 1, 5)
    reg.proveAggregate(a, o, sigs, sender=roles.stranger)  # round 0 goes back: rounds 0 and 1 reopen
    assert tuple(reg.submissionsOf(task, 1, trainer)) == (0, 0)  # nothing in the openings to come
    fund(roles.syncer, 10 * E18)
    ape.chain.mine(ELECTION_WINDOW_BLOCKS + 1)
    reg.registerSyncer(10 * E18, sender=roles.syncer)
    elect(task)
    c["credits"] = [0] * M
    r0 = _commit(c, 0, c["initial"])
    r1 = _commit(c, 1, r0, exclude=frozenset({(0, 1)}))  # trainer 1 delivered nothing for fragment 0 this time
    bitmaps = [0b11, 0b10, 0b11]
    assert rc.bitmaps_hash(bitmaps) == r1.roots[3]
    with ape.reverts(reg.Registry__NoMismatch):
        reg.proveOmission((task, 1, r1.roots, r0.roots, r0.weights_root), bitmaps, 0, 1, sender=roles.stranger)
    assert reg.getRun(task).currentRound == 2  # the honest commits stand


def _slot_answer(rnd: Round, f: int, i: int, signature: bytes | None = None) -> tuple:
    sub, acc = rnd.subs[f][i], rnd.states[f].accepted
    return (rnd.states[f].leaf.as_tuple(), rc.fragments_tree(rnd.leaves).path(f), sub.base_root, sub.payload_root,
            sub.payload_sumsq, sub.cid_hash, sub.payload_hash, signature or rnd.sigs[(f, i)], acc.path(i))


def test_a_slot_challenge_is_answered_with_the_signed_preimage_or_convicts(full_registry, fund, elect, sign, roles,
                                                                          chain, syncer_pool):
    """Anyone may ask for the signed preimage of a credited slot (a bond). Shown in time, with the
    trainer's signature, the bond goes to whoever answered and the struct hash is logged; a wrong
    signature is refused; a challenge nobody answers convicts the round (kind 4): the challenger
    gets its bond back and the bounty, the syncer loses its bond, the run rewinds. The seal waits
    for pending slot challenges."""
    reg = full_registry
    c = _start(reg, fund, elect, sign, roles, "root-slots")
    r0 = _commit(c, 0, c["initial"])
    task, stranger, relayer = c["task"], roles.stranger, roles.relayer
    claim = (task, 0, r0.roots, ZERO_ROOTS, bytes(32))
    bitmaps = [(1 << len(SIZES)) - 1] * M
    bond = reg.challengeBond(task)
    fund(stranger, 2 * bond)
    gas = {"challengeSlot": reg.challengeSlot(claim, bitmaps, 1, 0, sender=stranger).gas_used}
    with ape.reverts(reg.Registry__ChallengePending):
        reg.challengeSlot(claim, bitmaps, 1, 0, sender=stranger)
    with ape.reverts(reg.Registry__NotSignedBy):
        reg.answerSlot(task, 0, 1, 0, r0.roots, _slot_answer(r0, 1, 0, signature=r0.sigs[(1, 1)]), sender=relayer)
    before = reg.withdrawable(relayer)
    tx = reg.answerSlot(task, 0, 1, 0, r0.roots, _slot_answer(r0, 1, 0), sender=relayer)
    gas["answerSlot"] = tx.gas_used
    assert bytes(tx.decode_logs(reg.SlotAnswered)[0].structHash) == r0.subs[1][0].struct_hash()
    assert reg.withdrawable(relayer) - before == bond
    # a second challenge nobody answers
    reg.challengeSlot(claim, bitmaps, 0, 1, sender=stranger)
    chain.mine(deltatime=CHALLENGE_S + 1)
    with ape.reverts(reg.Registry__ChallengeDeadline):
        reg.answerSlot(task, 0, 0, 1, r0.roots, _slot_answer(r0, 0, 1), sender=relayer)
    syncer = reg.getRun(task).syncer
    stake = reg.syncerInfo(syncer)[0]
    held_before = reg.challengeBondsHeld()
    before = reg.withdrawable(stranger)
    tx = reg.expireSlot(claim, 0, 1, sender=relayer)  # anyone; the challenger is paid
    gas["expireSlot"] = tx.gas_used
    print("gas (M = 3, F = 2): " + ", ".join(f"{k} {v}" for k, v in gas.items()))
    ev = tx.decode_logs(reg.RoundProvenWrong)[0]
    assert (ev.kind, ev.fragment, ev.position, ev.prover, ev.syncer) == (4, 0, 1, stranger.address, syncer)
    slashed = c["params"]["syncerBond"]
    assert reg.withdrawable(stranger) - before == bond + slashed * BOUNTY_BPS // BPS
    assert reg.syncerInfo(syncer)[0] == stake - slashed
    assert held_before - reg.challengeBondsHeld() == bond
    assert reg.getRun(task).currentRound == 0


def test_a_lost_challenge_shows_in_the_sealed_receipt(full_registry, fund, elect, sign, roles, chain, syncer_pool):
    """A round whose slot challenge was answered (the challenger lost) seals with status 1 folded
    into its digest (RECEIPT.md, RunRoot.withStatus); the unchallenged rounds' digests go in as
    they are; the receipt verifies and the Python reference rebuilds the same bytes."""
    reg = full_registry
    c = _start(reg, fund, elect, sign, roles, "root-status")
    task, stranger = c["task"], roles.stranger
    r0 = _commit(c, 0, c["initial"])
    fund(stranger, reg.challengeBond(task))
    reg.challengeSlot((task, 0, r0.roots, ZERO_ROOTS, bytes(32)), [(1 << len(SIZES)) - 1] * M, 1, 0, sender=stranger)
    assert reg.getRound(task, 0).challengeStatus == 0  # pending is not lost
    reg.answerSlot(task, 0, 1, 0, r0.roots, _slot_answer(r0, 1, 0), sender=roles.relayer)
    assert reg.getRound(task, 0).challengeStatus == 1
    r1 = _commit(c, 1, r0)
    _commit(c, 2, r1)
    chain.mine(deltatime=CHALLENGE_S + 1)
    reg.sealRootRun(task, sender=stranger)
    _, serialized = reg.getReceipt(task)
    decoded = receipt.decode_receipt(bytes(serialized))
    plain = [bytes(reg.getRound(task, r).roundDigest) for r in range(3)]
    assert list(decoded.round_digests) == [receipt.with_status(plain[0], 1), plain[1], plain[2]]
    assert decoded.round_digests[0] != plain[0]
    assert receipt.run_root(bytes(serialized)) == bytes(reg.sealedRunRoot(task))
