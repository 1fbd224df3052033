"""Weights availability with the real root-flow syncer daemon (contracts/PROTOCOL.md §5 "Weights
availability", issue #23 attacks 2 and 3): anyone may bond a ``challengeWeights`` on a chunk of a
committed round's new weights or momentum, and an unanswered one convicts the round's committer
(``expireWeights``). An honest syncer must therefore answer each one from what it pinned, with the
round's fragment hashes (the leaves' §2 weights roots), or an outsider gets it slashed."""

from __future__ import annotations

import pytest

from roles_stack import SYNCER, TRAINERS, events, post_small_task, syncer_daemon, trainer_daemon
from stack import wait_until
from tenzro_operator.chain import RunStatus
from tenzro_operator.root_flow import chunk_weights_root, committed_rounds
from tenzro_operator.task_assets import fetch_weights, fetch_spec
from tenzro_operator.task_runtime import TaskRuntime
from tenzro_operator.transcript import RoundTranscript
from tenzro_trainer import round_commitment as rc

pytestmark = pytest.mark.timeout(400)

OUTSIDER = 8  # anvil account 8: funded, enrolled in nothing
ZERO_ROOTS = (bytes(32), bytes(32), 0, bytes(32))


@pytest.mark.slow
def test_an_outsiders_weights_challenges_are_answered_by_the_honest_syncer_and_the_run_seals(dev, runner, tmp_path):
    """Once round 0 is committed an outsider challenges chunk 0 of fragment 0's new weights and
    chunk 1 of fragment 1's momentum; after the deadline it expires whichever is unanswered (which
    would convict the syncer, kind 5). The honest syncer answers both: the outsider's bonds go to
    the syncer, nothing is proven wrong, the run seals; the committed fragment hashes are the §2
    roots of the pinned weights (a downloader checks them so, `fetch_weights(chunk_roots=True)`)."""
    tid = post_small_task(dev, trainers=2, quorum=2, fragments=2, rounds=2, grace_window_ms=16_000,
                          challenge_window_ms=10_000)
    runner.start("syncer", syncer_daemon(dev, tid, tmp_path / "syncer", straggler_wait_s=30.0, evaluate=False))
    for k in range(2):
        runner.start(f"t{k}", trainer_daemon(dev, TRAINERS[k], tid, tmp_path / f"t{k}"))
    client, outsider = dev.client(), dev.client(OUTSIDER)
    start = client.deployment.deploy_block
    wait_until(lambda: 0 in committed_rounds(client, tid, start, 2), 240, "round 0 committed", poll_s=0.2)
    asked = [(0, False, 0), (1, True, 1)]  # (fragment, momentum, chunk)
    for f, momentum, chunk in asked:
        outsider.challenge_weights(tid, 0, f, momentum, chunk)
    deadline = max(int(e["args"]["deadline"]) for e in events(client, tid, "WeightsChallenged"))
    bond = int(events(client, tid, "WeightsChallenged")[0]["args"]["bond"])


    def past_deadline() -> bool:
        client.w3.provider.make_request("evm_mine", [])
        return client.block_timestamp() > deadline

    wait_until(past_deadline, 60, "the challenges' deadline passed", poll_s=0.5)
    ev = committed_rounds(client, tid, start, 1)[0]
    roots = (bytes(ev["fragmentsRoot"]), bytes(ev["creditsRoot"]), int(ev["totalCredits"]),
             rc.bitmaps_hash([int(b) for b in ev["acceptedBitmaps"]]))
    answered = {(int(a["args"]["fragment"]), bool(a["args"]["momentum"]), int(a["args"]["chunkIndex"]))
                for a in events(client, tid, "WeightsAnswered")}
    for f, momentum, chunk in asked:
        if (f, momentum, chunk) not in answered:  # the attack: an unanswered challenge convicts the committer
            outsider.expire_weights((tid, 0, roots, ZERO_ROOTS, bytes(32)), f, momentum, chunk)
    assert events(client, tid, "RoundProvenWrong") == [] and answered == set(asked), answered
    results = runner.join(300)
    syncer = dev.client(SYNCER).address
    assert [a["args"]["answerer"] for a in events(client, tid, "WeightsAnswered")] == [syncer, syncer]
    assert results == {"syncer": 0, "t0": 0, "t1": 0}, results
    assert client.get_run(tid).status == RunStatus.SEALED and client.challenge_bonds_held() == 0
    assert bond > 0 and runner.daemons["syncer"].summary["weights_challenges_answered"] == 2
    # the committed weights root is over the §2 roots of the pinned weights, not their SHA-256
    ipfs = dev.ipfs()
    run = client.get_run(tid)
    runtime = TaskRuntime.from_spec(fetch_spec(ipfs, run.spec_cid, run.spec_hash))
    tr = RoundTranscript.parse(ipfs.cat(ev["transcriptCid"]), bytes(ev["transcriptHash"]))
    cids, shas = tr.weights_refs()
    state, _ = fetch_weights(ipfs, runtime, cids, shas, bytes(ev["weightsRoot"]), chunk_roots=True)
    assert chunk_weights_root(state, runtime.fragments) == bytes(ev["weightsRoot"])
    assert TaskRuntime.weights_root([ipfs.cat(c) for c in cids]) != bytes(ev["weightsRoot"])
