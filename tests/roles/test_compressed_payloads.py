"""Compressed outer gradients end to end (issue 10): a root-flow run whose spec picks MXFP4 with
error feedback (``metadata.protocol.compression``) on a real devnet and IPFS node. The trainers
encode through `PayloadEncoder` (their residuals saved in their data dirs), the syncer decodes
every payload under the spec's codec and commits by root, the run seals, a watcher's round check
finds nothing to prove, the receipt verifies by replay (``verify-receipt``), and every pinned
payload is measured against the dense payload of the same fragment."""

from __future__ import annotations

import json

import pytest

from roles_stack import TRAINERS, post_small_task, read_jsonl, syncer_daemon, trainer_daemon
from tenzro_operator import replay
from tenzro_operator.chain import RunStatus
from tenzro_operator.root_check import RootRoundChecker
from tenzro_operator.root_flow import committed_rounds
from tenzro_operator.transcript import RoundTranscript
from tenzro_trainer.compression import NoCompression, payload_bytes
from tenzro_trainer.compression.feedback import STATE_FORMAT
from tenzro_trainer.codec import read_safetensors

pytestmark = pytest.mark.timeout(400)

MXFP4_EF = {"kind": "mx", "element": "fp4_e2m1", "error_feedback": True}


@pytest.mark.slow
def test_a_root_flow_run_with_mxfp4_payloads_seals_replays_and_pins_fewer_bytes(dev, runner, tmp_path):
    tid = post_small_task(dev, trainers=2, quorum=2, fragments=2, rounds=2, grace_window_ms=16_000,
                          challenge_window_ms=4_000, compression="mx_fp4")
    # the draft's name is pinned as the full codec object
    client, ipfs = dev.client(), dev.ipfs()
    run = client.get_run(tid)
    spec = json.loads(ipfs.cat(run.spec_cid))
    assert spec["metadata"]["protocol"]["compression"] == {"kind": "mx", "element": "fp4_e2m1", "block": 32,
                                                          "error_feedback": False}
    # ... and a codec object the same way (error feedback on): this is the run served below
    tid = post_small_task(dev, trainers=2, quorum=2, fragments=2, rounds=2, grace_window_ms=16_000,
                          challenge_window_ms=4_000, compression=MXFP4_EF)
    runner.start("syncer", syncer_daemon(dev, tid, tmp_path / "syncer", straggler_wait_s=30.0, evaluate=False))
    for k in range(2):
        runner.start(f"t{k}", trainer_daemon(dev, TRAINERS[k], tid, tmp_path / f"t{k}"))
    assert runner.join(360) == {"syncer": 0, "t0": 0, "t1": 0}
    run = client.get_run(tid)
    assert run.status == RunStatus.SEALED

    # every payload of both rounds accepted, from both trainers
    rounds = committed_rounds(client, tid, client.deployment.deploy_block, 2)
    assert [list(rounds[r]["acceptedBitmaps"]) for r in (0, 1)] == [[3, 3], [3, 3]]

    # the bytes pinned per payload against the dense payload of the same fragment and header
    runtime = runner.daemons["syncer"].runtime
    assert runtime.codec.kind == "mx" and runtime.codec.error_feedback
    sizes, dense = [], []
    for r in (0, 1):
        tr = RoundTranscript.parse(ipfs.cat(rounds[r]["transcriptCid"]), bytes(rounds[r]["transcriptHash"]))
        for fr in tr.fragments:
            layout = {n: shape for n, (shape, _) in runtime.layouts[fr.fragment].items()}
            for s in fr.accepted:
                raw = ipfs.cat(s.cid)
                meta = {k: v for k, v in read_safetensors(raw)[1].items() if k not in ("codec", "numel")}
                sizes.append(len(raw))
                dense.append(payload_bytes(NoCompression(), layout, meta))
    assert len(sizes) == 8
    ratio = sum(dense) / sum(sizes)
    print(f"\npayload bytes per round and trainer: MXFP4+EF {sum(sizes) // 4:,} vs dense {sum(dense) // 4:,} "
          f"({ratio:.2f}x fewer); per payload {sorted(set(sizes))} vs {sorted(set(dense))}")
    assert ratio > 6.0, (sizes, dense)  # 4.25 bits a value against 32, plus the header
    for k in range(2):  # what the trainers logged is what was pinned
        logged = read_jsonl(tmp_path / f"t{k}" / "trainer-rounds.jsonl")
        assert [x["round"] for x in logged] == [0, 1] and all(x["payload_bytes"] < sum(dense) // 4 for x in logged)

    # each trainer's error feedback was saved after its last round, under the run's codec
    for k in range(2):
        tensors, meta = read_safetensors((tmp_path / f"t{k}" / f"trainer-ef-{tid.hex()}.safetensors").read_bytes())
        assert meta["format"] == STATE_FORMAT and meta["round"] == "1" and json.loads(meta["codec"])["element"] == "fp4_e2m1"
        assert sorted(tensors) == ["previous/0", "previous/1", "residual/0", "residual/1"]
        assert all(float(t.abs().sum()) > 0 for t in tensors.values())  # MXFP4 drops something: a residual

    # a watcher's check of each committed round decodes the payloads the same way: nothing to prove
    checker = RootRoundChecker.for_run(client, ipfs, tid, run, client.run_start_block(run))
    for r in (0, 1):
        res = checker.check(r, rounds[r])
        assert res.ok, res.detail

    # verify-receipt: the committed rounds replayed from the compressed payloads, the receipt verified
    report = replay.verify_receipt(client, ipfs, tid)
    assert report.ok and report.verifier_ok and report.payloads_checked == 8, str(report)
