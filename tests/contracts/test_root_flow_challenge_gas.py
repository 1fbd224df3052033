"""Gas per challenge of the root flow (contracts/PROTOCOL.md §5, §6) over M x F, from real receipts
on ape-foundry's anvil with the via-IR build, with the machinery of ``test_root_flow_proofs``
(real pseudo-gradients signed by the trainers' keys, aggregated and stepped as the syncer does,
proofs built with ``tenzro_trainer.round_commitment``) at M trainers and F fragments of n = 24
values each (two chunks of 16: the same proof depth in every fragment, so the figures differ only
by M and F). Per shape, four fresh runs, one per conviction (a convicted round rewinds its run and
leaves it without a syncer):

- proveAggregate: round 1 commits one flipped bit at fragment 0, coordinate 5, every trainer
  accepted on every fragment (K = M entries);
- proveBitmap: round 0's bitmaps credit trainer 1 with fragment 0, which the syncer left out of
  the fragment's accepted set;
- challengeSlot and answerSlot on honest round 0 (the run of proveAggregate, before round 1);
  expireSlot on an unanswered slot challenge of an honest round 0;
- proveOmission: trainer 1's forced submission of fragment 0 (commitSubmission in the commit
  phase, the reveal after it) left out of round 0, committed after the round's deadline (with
  one trainer left out a fragment has M - 1 accepted, under the quorum of 2 at M = 2).

Every prover, challenger and answerer is a fresh account: its bounty, or the bond it is paid, is
its first credit (a fresh storage word; the worst case). A warm-up conviction first makes the
registry's burned total non-zero (that word is fresh once in a registry's life).

With TENZRO_CHALLENGE_GAS_REPORT=<file> set, the grid is written there as contracts/GAS.md's
per-challenge table:

    TENZRO_CHALLENGE_GAS_REPORT=/tmp/challenge-gas.md .venv/bin/pytest \\
        tests/contracts/test_root_flow_challenge_gas.py -m "slow or not slow" -q -s
"""

from __future__ import annotations

import dataclasses
import os

import pytest
import test_root_flow_proofs as proofs
import torch
from registry_helpers import CHALLENGE_S, E18, force, gas_grid, prove_committed, sha
from test_root_flow_proofs import ZERO_ROOTS, _bitmap_opening, _commit, _proof, _slot_answer, _start

from tenzro_trainer import round_commitment as rc
from tenzro_trainer.commitment import ChunkTree

N = 24  # values per fragment
FRAGMENT, COORDINATE, TRAINER = 0, 5, 1  # the proven fragment, the flipped coordinate, the trainer left out
REPORT = os.environ.get("TENZRO_CHALLENGE_GAS_REPORT")
COLUMNS = ("proveAggregate", "proveBitmap", "proveOmission", "challengeSlot", "answerSlot", "expireSlot")
_grid: dict[tuple[int, int], dict[str, int]] = {}


@pytest.fixture(scope="module")
def prepaid(fund, token):
    """fund(account, amount) that mints (and approves) 50 times ``amount`` when the account runs
    short and nothing otherwise: the four runs of a shape enroll their trainers with one
    transaction each, not three."""

    def _fund(account, amount: int):
        if token.balanceOf(account) < amount:
            fund(account, 50 * amount)

    return _fund


@pytest.fixture(scope="module")
def shape(full_registry, prepaid, elect, sign, roles, syncer_pool, trainer_accounts, accounts, chain):
    """``start(monkeypatch, m, f, name)``: a fresh M-trainer, F-fragment run of n = N values per
    fragment, posted, enrolled and with its syncer elected (test_root_flow_proofs._start, with that
    module's M and SIZES patched for the test); ``fresh(tokens=0)``: a new account with ether and
    ``tokens`` approved. A warm-up conviction runs once first, so that no measured proof writes
    the registry's burned total for the first time."""
    reg = full_registry
    many = dataclasses.replace(roles, trainers=trainer_accounts)

    def fresh(tokens: int = 0):
        a = accounts.generate_test_account()
        chain.provider.set_balance(a.address, 100 * E18)
        if tokens:
            prepaid(a, tokens)
        return a

    def start(mp, m: int, f: int, name: str) -> dict:
        mp.setattr(proofs, "M", m)
        mp.setattr(proofs, "SIZES", [N] * f)
        return _start(reg, prepaid, elect, sign, many, name)

    if reg.burned() == 0:
        with pytest.MonkeyPatch.context() as mp:
            c = start(mp, 2, 1, "challenge-gas-warm-up")
            r0 = _commit(c, 0, c["initial"], bitmaps=[1, 1], exclude=frozenset({(0, 1)}))
            reg.proveBitmap((c["task"], 0, r0.roots, ZERO_ROOTS, bytes(32)), _bitmap_opening(r0, [1, 1], 0, 1),
                            sender=roles.stranger)
        assert reg.burned() > 0
    return {"start": start, "fresh": fresh}


def _proven(reg, tx, task: bytes, rnd: int, kind: int, fragment: int, position: int, syncer: str) -> int:
    """The conviction's RoundProvenWrong is the expected one, the syncer lost its bond and the run
    its syncer; returns the gas."""
    ev = tx.decode_logs(reg.RoundProvenWrong)[0]
    assert (ev.round, ev.kind, ev.fragment, ev.position, ev.syncer) == (rnd, kind, fragment, position, syncer)
    assert ev.slashed > 0 and ev.bounty > 0
    assert reg.getRun(task).syncer == "0x" + "00" * 20
    return int(tx.gas_used)


@pytest.mark.slow
@pytest.mark.parametrize("m,f", gas_grid(bool(REPORT)))
def test_challenge_gas_grid(full_registry, shape, roles, chain, sign, monkeypatch, m, f):
    """Gas of each challenge at M x F; each proof convicts with its kind; the aggregate proof
    grows with M at fixed F (one signature recovery and one opening per accepted entry)."""
    reg, start, fresh = full_registry, shape["start"], shape["fresh"]
    full = (1 << f) - 1
    gas: dict[str, int] = {}

    # proveAggregate, with challengeSlot / answerSlot on its honest round 0
    c = start(monkeypatch, m, f, f"challenge-gas-aggregate-{m}-{f}")
    task, syncer = c["task"], reg.getRun(c["task"]).syncer
    r0 = _commit(c, 0, c["initial"])
    bond = reg.challengeBond(task)
    challenger, answerer = fresh(10 * bond), fresh()
    tx = reg.challengeSlot((task, 0, r0.roots, ZERO_ROOTS, bytes(32)), [full] * m, FRAGMENT, 0, sender=challenger)
    gas["challengeSlot"] = int(tx.gas_used)
    tx = reg.answerSlot(task, 0, FRAGMENT, 0, r0.roots, _slot_answer(r0, FRAGMENT, 0), sender=answerer)
    assert bytes(tx.decode_logs(reg.SlotAnswered)[0].structHash) == r0.subs[FRAGMENT][0].struct_hash()
    assert reg.withdrawable(answerer) == bond
    gas["answerSlot"] = int(tx.gas_used)
    r1 = _commit(c, 1, r0, flip=(FRAGMENT, COORDINATE))
    a, o, sigs = _proof(c, 1, r1, r0, FRAGMENT, COORDINATE)
    assert len(sigs) == m  # K = M accepted entries
    tx = prove_committed(reg, "proveAggregate", a, o, sigs, sender=fresh())
    gas["proveAggregate"] = _proven(reg, tx, task, 1, 1, FRAGMENT, COORDINATE, syncer)

    # proveBitmap: trainer 1 credited with fragment 0, which its accepted set leaves out
    c = start(monkeypatch, m, f, f"challenge-gas-bitmap-{m}-{f}")
    task, syncer = c["task"], reg.getRun(c["task"]).syncer
    r0 = _commit(c, 0, c["initial"], bitmaps=[full] * m, exclude=frozenset({(FRAGMENT, TRAINER)}))
    opening = _bitmap_opening(r0, [full] * m, FRAGMENT, TRAINER)
    assert opening[5] == bytes(32)  # an empty slot under a set bit
    tx = prove_committed(reg, "proveBitmap", (task, 0, r0.roots, ZERO_ROOTS, bytes(32)), opening, sender=fresh())
    gas["proveBitmap"] = _proven(reg, tx, task, 0, 2, FRAGMENT, TRAINER, syncer)

    # proveOmission: trainer 1's live forced submission of fragment 0 left out
    c = start(monkeypatch, m, f, f"challenge-gas-omission-{m}-{f}")
    task, syncer, t = c["task"], reg.getRun(c["task"]).syncer, c["trainers"][TRAINER]
    p = (torch.randn(N, generator=c["g"]) * 0.01).float()
    root, sumsq = ChunkTree(p).root
    fields = (root, sumsq, f"bafyforced{m}x{f}", sha(f"forced {m} {f}"))
    force(reg, task, t, FRAGMENT, sign(t, task, 0, FRAGMENT, fields), relayer=roles.relayer)  # commit, then reveal
    # past the deadline: the quorum (2) is not checked, M - 1 accepted on fragment 0 is allowed at M = 2
    chain.mine(deltatime=reg.getRun(task).roundDeadline + 1 - chain.pending_timestamp)
    left_out = frozenset({(FRAGMENT, TRAINER)})
    r0 = _commit(c, 0, c["initial"], exclude=left_out)
    bitmaps = [full & ~(1 << FRAGMENT) if i == TRAINER else full for i in range(m)]
    assert rc.bitmaps_hash(bitmaps) == r0.roots[3]
    tx = prove_committed(reg, "proveOmission", (task, 0, r0.roots, ZERO_ROOTS, bytes(32)), bitmaps, FRAGMENT,
                         TRAINER, sender=fresh())
    gas["proveOmission"] = _proven(reg, tx, task, 0, 3, FRAGMENT, TRAINER, syncer)

    # expireSlot: a slot challenge of an honest round nobody answers
    c = start(monkeypatch, m, f, f"challenge-gas-expire-{m}-{f}")
    task, syncer = c["task"], reg.getRun(c["task"]).syncer
    r0 = _commit(c, 0, c["initial"])
    claim = (task, 0, r0.roots, ZERO_ROOTS, bytes(32))
    challenger = fresh(10 * bond)
    reg.challengeSlot(claim, [full] * m, FRAGMENT, TRAINER, sender=challenger)
    chain.mine(deltatime=CHALLENGE_S + 1)
    tx = reg.expireSlot(claim, FRAGMENT, TRAINER, sender=roles.relayer)
    gas["expireSlot"] = _proven(reg, tx, task, 0, 4, FRAGMENT, TRAINER, syncer)
    assert reg.withdrawable(challenger) == bond + tx.decode_logs(reg.RoundProvenWrong)[0].bounty

    _grid[(m, f)] = gas
    print(f"challenge gas at M={m}, F={f}: " + ", ".join(f"{k} {gas[k]}" for k in COLUMNS))
    smaller = [g["proveAggregate"] for (m2, f2), g in _grid.items() if f2 == f and m2 < m]
    assert all(gas["proveAggregate"] > s for s in smaller)
    if REPORT:
        _write()


def _write():
    lines = ["| M | F | " + " | ".join(f"`{k}`" for k in COLUMNS) + " |",
             "| ---: | ---: |" + " ---: |" * len(COLUMNS)]
    for (m, f), g in sorted(_grid.items()):
        lines.append(f"| {m} | {f} | " + " | ".join(f"{g[k]:,}" for k in COLUMNS) + " |")
    with open(REPORT, "w") as fh:
        fh.write("\n".join(lines) + "\n")
