"""Gas of the registry's transactions, measured from real receipts on ape-foundry's anvil
(gas used includes the 21,000 intrinsic gas and calldata).

`submitOuterGradient` must stay at or under 80,000 gas. The gas of a round is the sum of every
transaction the round needs (each trainer's submissions and the finalize; the election is once
per run). With TENZRO_GAS_REPORT=<file> set, the measurements are written there as the Markdown
tables of contracts/GAS.md, with the v1 flow's per-round total (the root flow's figure lines
come from test_root_flow_gas.py):

    TENZRO_GAS_REPORT=/tmp/gas.md .venv/bin/pytest tests/contracts/test_registry_gas.py -m "slow or not slow" -q
"""

from __future__ import annotations

import os

import pytest
from registry_helpers import E18, GRACE_S, as_tuple, commit, nan_payload, params, sha

SUBMIT_CEILING = 80_000
REPORT = os.environ.get("TENZRO_GAS_REPORT")
_rows: dict = {"ops": [], "grid": [], "round": None}


def _gas(tx) -> int:
    return int(tx.gas_used)


def _run(registry, post_task, enroll, elect, submit, roles, name: str, m: int, f: int, rounds: int = 1):
    """Posts an M x F run, fills it, and returns the gas of every step of round 0."""
    task_gas = {}
    task = post_task(name, trainerCount=m, quorum=max(1, (3 * m) // 4), fragmentCount=f, maxRounds=rounds)
    enroll_gas = [_gas(enroll(task, t)) for t in roles.trainers[:m]]
    elect(task)
    first, later = [], []
    for t in roles.trainers[:m]:
        for j in range(f):
            (first if j == 0 else later).append(_gas(submit(task, t, 0, j)))
    fin = registry.finalizeRound(commit(task, 0, f, [(1 << f) - 1] * m), sender=roles.syncer)
    task_gas.update(enroll=enroll_gas, submit_first=first, submit_later=later, finalize=_gas(fin))
    return task, task_gas


def test_gas_at_reference_shape(registry, enroll, submit, fund, syncer_pool, roles):
    """M = 8, F = 12 (the reference run): every figure of the gas report, and the 80k ceiling."""
    fund(roles.sponsor, 1000 * E18)
    # a grace window the 96 submissions fit in however slow the host (30 s did not on a loaded one)
    p = params("gas-ref", trainerCount=8, quorum=6, fragmentCount=12, maxRounds=1, graceWindowMs=600_000)
    post_gas = _gas(registry.postTask(as_tuple(p), sender=roles.sponsor))
    task = p["taskId"]
    enroll_gas = [_gas(enroll(task, t)) for t in roles.trainers[:8]]
    # two steps, two blocks (one syncer candidate in the pool: the draw's loop is at its shortest)
    request = _gas(registry.requestSyncerElection(task, sender=roles.stranger))
    elect = _gas(registry.electSyncer(task, sender=roles.stranger))
    first, later = [], []
    for t in roles.trainers[:8]:
        for j in range(12):
            (first if j == 0 else later).append(_gas(submit(task, t, 0, j)))
    fin = _gas(registry.finalizeRound(commit(task, 0, 12, [(1 << 12) - 1] * 8), sender=roles.syncer))
    seal = _gas(registry.seal(task, sender=roles.stranger))
    claim = _gas(registry.claimSyncerFee(task, sender=roles.syncer))
    wd = _gas(registry.withdraw(sender=roles.trainers[0]))

    assert max(first + later) <= SUBMIT_CEILING, f"submitOuterGradient used {max(first + later)} gas"
    _rows["round"] = sum(first) + sum(later) + fin
    _rows["ops"] = [
        ("postTask (F = 12)", post_gas, post_gas),
        ("enrollTrainer (last one opens round 0)", min(enroll_gas), max(enroll_gas)),
        ("requestSyncerElection", request, request),
        ("electSyncer (first election, 1 candidate)", elect, elect),
        ("submitOuterGradient, first fragment of a trainer in a round", min(first), max(first)),
        ("submitOuterGradient, further fragments", min(later), max(later)),
        ("finalizeRound, M = 8, F = 12, all 96 accepted", fin, fin),
        ("seal (R = 1, M = 8)", seal, seal),
        ("claimSyncerFee", claim, claim),
        ("withdraw", wd, wd),
    ]
    for name, lo, hi in _rows["ops"]:
        print(f"gas {name}: {lo:,}" + ("" if lo == hi else f" .. {hi:,}"))
    print(f"v1 flow, gas of every transaction of a round at M=8, F=12: {_rows['round']}")
    if REPORT:
        _write()


def test_gas_of_evidence(registry, evidence, start_run, sign, fund, roles, chain):
    """Gas of the evidence functions (PROTOCOL.md §4) at M = 8: proving a NaN by opening one chunk
    of a 2,000-value fragment (a 7-level proof), proving a norm outlier with the 7 other signed sums,
    and an availability challenge answered, then one expired."""
    import torch

    from tenzro_trainer.commitment import ChunkTree

    task = start_run("gas-evidence", m=8, quorum=1, fragmentCount=2, maxRounds=1)
    tr = roles.trainers[:8]
    nan_signed, opening = nan_payload(sign, tr[0], task, 0, 0, 1000)
    registry.submitOuterGradient(task, 0, 0, nan_signed, sender=roles.relayer)
    nan = _gas(evidence.proveInvalid(task, 0, 0, tr[0], 3, nan_signed, opening, [], sender=roles.stranger))
    signed = []
    for i, t in enumerate(tr):
        values = torch.full((2000,), 100.0 if i == 7 else 1.0)
        root, sumsq = ChunkTree(values).root
        signed.append(sign(t, task, 0, 1, (root, sumsq, f"bafkreisq{i}", sha(f"sq{i}"))))
        registry.submitOuterGradient(task, 0, 1, signed[-1], sender=roles.relayer)
    norm = _gas(evidence.proveInvalid(task, 0, 1, tr[7], 4, signed[7], (0, b"\x00" * 64, [], []), signed[:7],
                                      sender=roles.stranger))
    fund(roles.syncer, 2 * evidence.challengeBond(task))
    challenge = _gas(evidence.challengeAvailability(task, 0, 1, tr[1], signed[1], 3, sender=roles.syncer))
    tree = ChunkTree(torch.full((2000,), 1.0))
    proof = tree.proof(3)
    answer = _gas(evidence.answerAvailability(task, 0, 1, tr[1], (3, tree.chunk(3), [h for h, _ in proof],
                                                                 [s_ for _, s_ in proof]), sender=roles.stranger))
    evidence.challengeAvailability(task, 0, 1, tr[2], signed[2], 0, sender=roles.syncer)
    chain.mine(deltatime=GRACE_S)
    expire = _gas(evidence.expireAvailability(task, 0, 1, tr[2], sender=roles.stranger))
    _rows["evidence"] = [
        ("proveInvalid, NonFinite (one chunk, 7-level proof)", nan),
        ("proveInvalid, NormOutlier (8 signed sums)", norm),
        ("challengeAvailability", challenge),
        ("answerAvailability (7-level proof)", answer),
        ("expireAvailability", expire),
    ]
    for name, g in _rows["evidence"]:
        print(f"gas {name}: {g:,}")
    assert max(nan, answer, expire, challenge) < 300_000 and norm < 1_000_000
    if REPORT:
        _write()


@pytest.mark.slow
@pytest.mark.parametrize("m,f", [(m, f) for m in (2, 4, 8) for f in (1, 4, 12)])
def test_finalize_gas_grid(registry, post_task, enroll, elect, submit, syncer_pool, roles, m, f):
    """finalizeRound gas over M x F with every submission accepted (its worst case)."""
    _, g = _run(registry, post_task, enroll, elect, submit, roles, f"grid-{m}-{f}", m, f)
    _rows["grid"].append((m, f, g["finalize"]))
    assert max(g["submit_first"] + g["submit_later"]) <= SUBMIT_CEILING
    if REPORT:
        _write()


def _write():
    lines = ["| operation | min gas | max gas |", "| --- | ---: | ---: |"]
    lines += [f"| {name} | {lo:,} | {hi:,} |" for name, lo, hi in _rows["ops"]]
    if _rows["round"] is not None:
        lines += ["", f"v1 flow, gas of every transaction of a round at M=8, F=12: {_rows['round']}"]
    if _rows.get("evidence"):
        lines += ["", "| evidence | gas |", "| --- | ---: |"]
        lines += [f"| {name} | {g:,} |" for name, g in _rows["evidence"]]
    if _rows["grid"]:
        lines += ["", "| M | F | finalizeRound gas |", "| ---: | ---: | ---: |"]
        lines += [f"| {m} | {f} | {g:,} |" for m, f, g in sorted(_rows["grid"])]
    with open(REPORT, "w") as fh:
        fh.write("\n".join(lines) + "\n")
