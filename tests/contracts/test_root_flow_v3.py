"""The Protocol v3 challenges of issue #23 on ape-foundry's anvil with the via-IR build (the
deploy build), with the machinery of ``test_root_flow_proofs`` (real signed pseudo-gradients,
rounds aggregated and committed as the syncer does), at M = 3 trainers and F = 2 fragments of
40 and 24 values (3 and 2 chunks); `-s` prints the gas of each call for contracts/GAS.md:

- weights availability (attack 2) and the receipt's model hash (attack 3): ``challengeWeights``
  of a chunk of a committed round's new weights or momentum, ``answerWeights`` with the fragment
  leaf, the round's fragment hashes (the leaves' weights roots) and the chunk's opening, and
  ``expireWeights`` of an unanswered one (conviction and rewind);
- the whole-payload availability challenge of a forced submission (attack 5): answered with every
  chunk of the payload, or it lapses;
- the norm screen against the previous round's accepted sums (attack 6): ``proveNormOutlier``;
- commit never reveal: ``slashUnrevealed`` of a forced commitment the round's opening never saw
  revealed.
"""

from __future__ import annotations

import ape
import torch
from registry_helpers import CHALLENGE_S, MIN_STAKE, force, sha, to_reveal_phase
from test_root_flow_proofs import M, SIZES, ZERO_ROOTS, _commit, _force_commit, _start

from tenzro_operator.chain import ChunkOpening
from tenzro_trainer import round_commitment as rc
from tenzro_trainer.commitment import ChunkTree

WHOLE = 2**32 - 1  # challengeAvailability's chunkIndex for the whole payload


def _weights_answer(rnd, f: int, momentum: bool, chunk: int) -> tuple:
    """The WeightsOpening of chunk ``chunk`` of fragment f's weights (or momentum) in round ``rnd``."""
    w, m = rnd.vecs[f]
    tree = ChunkTree(m if momentum else w)
    proof = tree.proof(chunk)
    opening = (chunk, tree.chunk(chunk), [h for h, _ in proof], [s for _, s in proof])
    return (rnd.states[f].leaf.as_tuple(), rc.fragments_tree(rnd.leaves).path(f),
            [s.leaf.weights_root for s in rnd.states], opening)


def test_weights_are_answered_chunk_by_chunk_or_the_round_is_convicted(full_registry, fund, elect, sign, roles,
                                                                       chain, syncer_pool):
    """Anyone demands a chunk of a committed round's new weights or momentum (a bond); the answer
    opens it under the fragment leaf, with the round's fragment hashes, which must be the leaves'
    weights roots (the receipt's model); the bond goes to the answerer. A wrong chunk is refused;
    a challenge nobody answers convicts the round (kind 5): the challenger gets its bond back and
    the bounty, the syncer loses its bond, the run rewinds."""
    reg = full_registry
    c = _start(reg, fund, elect, sign, roles, "root-weights")
    r0 = _commit(c, 0, c["initial"])
    task, stranger, relayer = c["task"], roles.stranger, roles.relayer
    bond = reg.challengeBond(task)
    fund(stranger, 3 * bond)
    gas = {"challengeWeights": reg.challengeWeights(task, 0, 0, False, 2, sender=stranger).gas_used}
    reg.challengeWeights(task, 0, 1, True, 1, sender=stranger)
    with ape.reverts(reg.Registry__BadOpening):  # chunk 2 of fragment 0 is not chunk 1
        bad = list(_weights_answer(r0, 0, False, 1))
        reg.answerWeights(task, 0, 0, False, r0.roots, (bad[0], bad[1], bad[2], (2, *bad[3][1:])), sender=relayer)
    before = reg.withdrawable(relayer)
    tx = reg.answerWeights(task, 0, 0, False, r0.roots, _weights_answer(r0, 0, False, 2), sender=relayer)
    gas["answerWeights"] = tx.gas_used
    assert bytes(tx.decode_logs(reg.WeightsAnswered)[0].chunk) == ChunkTree(r0.vecs[0][0]).chunk(2)
    assert reg.withdrawable(relayer) - before == bond
    # the momentum challenge nobody answers
    chain.mine(deltatime=CHALLENGE_S + 1)
    syncer = reg.getRun(task).syncer
    tx = reg.expireWeights((task, 0, r0.roots, ZERO_ROOTS, bytes(32)), 1, True, 1, sender=relayer)
    gas["expireWeights"] = tx.gas_used
    print("gas (M = 3, F = 2): " + ", ".join(f"{k} {v}" for k, v in gas.items()))
    ev = tx.decode_logs(reg.RoundProvenWrong)[0]
    assert (ev.kind, ev.fragment, ev.position, ev.prover, ev.syncer) == (5, 1, 2**32 | 1, stranger.address, syncer)
    assert reg.getRun(task).currentRound == 0 and reg.challengeBondsHeld() == 0


def test_a_forced_payload_is_answered_whole_or_lapses(full_registry, fund, elect, sign, roles, chain, syncer_pool):
    """The syncer challenges the whole payload of three forced submissions; two trainers answer
    with every chunk (the bond; the payload is in the event; n = 40 and 24 give the cost per
    chunk), the third with one chunk, which does not answer, so its submission lapses, and the
    syncer that leaves it out is not convicted.
    The whole answer is the trainer daemon's (``ChunkOpening.of(tree, WHOLE_PAYLOAD)``)."""
    reg = full_registry
    c = _start(reg, fund, elect, sign, roles, "root-whole")
    task, trainers = c["task"], c["trainers"]
    g = c["g"].get_state()
    pairs = ((0, 1), (1, 2), (1, 0))  # (fragment, trainer): the last one withholds
    forced = {(f, i): _force_commit(c, 0, f, i)[0] for f, i in pairs}
    c["g"].set_state(g)  # the same draws as _force_commit: the payloads it signed
    payloads = {(f, i): (torch.randn(SIZES[f], generator=c["g"]) * 0.01).float() for f, i in pairs}
    to_reveal_phase(reg, task)
    for (f, i), sp in forced.items():
        reg.submitOuterGradient(task, 0, f, sp, sender=roles.relayer)
        fund(roles.syncer, reg.challengeBond(task))
        reg.challengeAvailability(task, 0, f, trainers[i], sp, WHOLE, sender=roles.syncer)
    gas = {}
    for (f, i), p in payloads.items():
        tree = ChunkTree(p)
        whole = ChunkOpening.of(tree, WHOLE).to_abi()  # what the trainer daemon sends (roles/challenges.py)
        assert whole == (WHOLE, b"".join(tree.chunk(k) for k in range(tree.num_chunks)), [],
                         [tree.leaf(k)[1] for k in range(tree.num_chunks)])
        if i == 0:  # one chunk is no answer
            with ape.reverts(reg.Registry__BadOpening):
                reg.answerAvailability(task, 0, f, trainers[i], (WHOLE, tree.chunk(0), [], [tree.leaf(0)[1]]),
                                       sender=trainers[i])
            continue
        tx = reg.answerAvailability(task, 0, f, trainers[i], whole, sender=trainers[i])
        gas[f"whole answer, n = {SIZES[f]} ({tree.num_chunks} chunks)"] = tx.gas_used
    print("gas (M = 3, F = 2): " + ", ".join(f"{k} {v}" for k, v in gas.items()))
    chain.mine(deltatime=CHALLENGE_S + 1)
    reg.expireAvailability(task, 0, 1, trainers[0], sender=roles.stranger)
    r0 = _commit(c, 0, c["initial"], exclude=frozenset({(1, 0)}))  # the answered payloads are in
    bitmaps = [0b01, 0b11, 0b11]
    with ape.reverts(reg.Registry__NoMismatch):
        reg.proveOmission((task, 0, r0.roots, ZERO_ROOTS, bytes(32)), bitmaps, 1, 0, sender=roles.stranger)


def test_the_norm_screen_judges_against_the_previous_rounds_accepted_sums(full_registry, fund, elect, sign, roles,
                                                                          syncer_pool):
    """Round 0 accepts every trainer (sums about 0.004 and 0.002); in round 1 a trainer forces a
    payload 100x larger on fragment 0: proven a NormOutlier against round 0's accepted sums
    (signed, opened from its fragment leaf); proveInvalid proves no norm outlier (reason 4 is
    Registry__UnknownReason there)."""
    reg = full_registry
    c = _start(reg, fund, elect, sign, roles, "root-norm")
    task, trainers = c["task"], c["trainers"]
    r0 = _commit(c, 0, c["initial"])
    reg_round = 1
    p = (torch.randn(SIZES[0], generator=c["g"]) * 1.0).float()  # ~100x the honest 0.01 scale
    root, sumsq = ChunkTree(p).root
    fields = (root, sumsq, "bafyoutlier", sha("outlier"))
    sp = c["sign"](trainers[0], task, reg_round, 0, fields)
    force(reg, task, trainers[0], 0, sp, relayer=roles.relayer)  # its commitment, then the reveal
    with ape.reverts(reg.Registry__UnknownReason):  # proveInvalid proves no norm outlier
        reg.proveInvalid(task, reg_round, 0, trainers[0], 4, sp, (0, b"", [], []), sender=roles.stranger)
    acc = r0.states[0].accepted
    entries = [(i, s.base_root, s.payload_root, s.payload_sumsq, s.cid_hash, s.payload_hash, acc.path(i),
                r0.sigs[(0, i)]) for i, s in sorted(r0.subs[0].items())]
    ref = (r0.roots, r0.states[0].leaf.as_tuple(), rc.fragments_tree(r0.leaves).path(0), entries)
    tx = reg.proveNormOutlier(task, reg_round, 0, trainers[0], sp, ref, sender=roles.stranger)
    print(f"gas proveNormOutlier (M = 3, F = 2, a reference of {M} entries): {tx.gas_used}")
    assert tx.decode_logs(reg.InvalidProven)[0].reason == 4


def test_a_forced_commitment_never_revealed_is_slashed_and_burned(full_registry, fund, elect, sign, roles, chain,
                                                                   syncer_pool):
    """Trainer 2 commits a forced submission of fragment 0 and never reveals it: the round commits
    only after its deadline; then anyone slashes the lapsed commitment (5 % of the stake, reason
    6), all of it burned (the caller gets nothing), once; trainer 1, who revealed, is not
    slashable."""
    reg = full_registry
    c = _start(reg, fund, elect, sign, roles, "root-unrevealed")
    task, trainers, stranger = c["task"], c["trainers"], roles.stranger
    sp1, _ = _force_commit(c, 0, 1, 1)
    _force_commit(c, 0, 0, 2)
    with ape.reverts(reg.Registry__RoundNotCommitted):  # the reveal phase is still the trainer's
        reg.slashUnrevealed(task, 0, 0, trainers[2], sender=stranger)
    to_reveal_phase(reg, task)
    reg.submitOuterGradient(task, 0, 1, sp1, sender=roles.relayer)
    run = reg.getRun(task)
    chain.mine(deltatime=run.roundDeadline + 1 - chain.pending_timestamp)
    _commit(c, 0, c["initial"], exclude=frozenset({(0, 2), (1, 1)}))
    assert reg.getRound(task, 0).openedAt == run.roundOpenedAt
    burned, paid = reg.burned(), reg.withdrawable(stranger)
    tx = reg.slashUnrevealed(task, 0, 0, trainers[2], sender=stranger)
    print(f"gas slashUnrevealed (M = 3, F = 2): {tx.gas_used}")
    ev = tx.decode_logs(reg.TrainerSlashed)[0]
    assert (ev.trainer, ev.reason, ev.round, ev.fragment, ev.amount) == (trainers[2].address, 6, 0, 0,
                                                                           MIN_STAKE * 5 // 100)
    assert reg.burned() - burned == ev.amount and reg.withdrawable(stranger) == paid
    with ape.reverts(reg.Registry__NotCommitted):  # once
        reg.slashUnrevealed(task, 0, 0, trainers[2], sender=stranger)
    with ape.reverts(reg.Registry__NotCommitted):  # revealed
        reg.slashUnrevealed(task, 0, 1, trainers[1], sender=stranger)
