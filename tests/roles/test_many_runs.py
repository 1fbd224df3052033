"""Daemons without a configured task id serve run after run: one syncer and two trainers, each
in one process (thread), discover two posted runs, serve the first to its seal, reset, and serve
the second. On a devnet of its own, so no other test's unfinished run can be discovered."""

from __future__ import annotations

import pytest

from roles_stack import TRAINERS, devnet_stack, post_small_task, read_jsonl, syncer_daemon, trainer_daemon
from tenzro_operator.chain import RunStatus

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def test_one_syncer_and_trainers_serve_two_runs_in_turn(tmp_path, runner):
    with devnet_stack(tmp_path / "devnet") as dev:
        first = post_small_task(dev, trainers=2, quorum=2, fragments=2, rounds=2)
        second = post_small_task(dev, trainers=2, quorum=2, fragments=2, rounds=2)
        runner.start("syncer", syncer_daemon(dev, None, tmp_path / "syncer", max_runs=2, discover_timeout_s=60))
        for i, idx in enumerate(TRAINERS[:2]):
            runner.start(f"trainer{i}", trainer_daemon(dev, idx, None, tmp_path / f"t{i}", max_runs=2,
                                                       discover_timeout_s=60))
        results = runner.join(240)
        assert results == {"syncer": 0, "trainer0": 0, "trainer1": 0}

        client = dev.client()
        for tid in (first, second):
            run = client.get_run(tid)
            assert run.status == RunStatus.SEALED
            assert run.syncer == dev.client(2).address
            receipt = client.get_receipt(tid)
            assert client.verify_receipt(receipt.serialized, receipt.run_root)
            for idx in TRAINERS[:2]:  # both trainers took part in both runs, every fragment accepted
                st = client.trainer_stats(tid, dev.client(idx).address)
                assert (st.accepted, st.total_missed, st.slashed) == (4, 0, 0)
        # the syncer finalized 2 rounds of each run, in turn, and kept one state file per run
        rounds = read_jsonl(tmp_path / "syncer" / "syncer-rounds.jsonl")
        assert [(r["task"], r["round"]) for r in rounds] == \
            [("0x" + t.hex(), r) for t in (first, second) for r in (0, 1)]
        assert len(list((tmp_path / "syncer").glob("syncer-*.pt"))) == 2
        for i in range(2):  # each trainer's round log: run 1 rounds 0, 1, then run 2 rounds 0, 1
            assert [r["round"] for r in read_jsonl(tmp_path / f"t{i}" / "trainer-rounds.jsonl")] == [0, 1, 0, 1]
