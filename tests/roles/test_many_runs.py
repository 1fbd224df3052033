"""Daemons without a configured task id serve many runs: trainers join runs in turn, the syncer
serves every run it is elected for at once (one thread per run), so a run that waits does not
hold up another. Each test has a devnet of its own, so no other test's unfinished run can be
discovered."""

from __future__ import annotations

import time

import pytest

from roles_stack import (
    SYNCER,
    TRAINERS,
    accepted_counts,
    devnet_stack,
    post_small_task,
    read_jsonl,
    syncer_daemon,
    trainer_daemon,
)
from tenzro_operator.chain import ZERO_ADDRESS, RunStatus

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
            assert run.syncer == dev.client(SYNCER).address
            receipt = client.get_receipt(tid)
            assert client.verify_receipt(receipt.serialized, receipt.run_root)
            accepted = accepted_counts(client, tid)
            for idx in TRAINERS[:2]:  # both trainers took part in both runs, every fragment accepted
                who = dev.client(idx).address
                assert (accepted[who], client.trainer_stats(tid, who).slashed) == (4, 0)
        # the syncer committed 2 rounds of each run, in turn, and kept one state file per run
        rounds = read_jsonl(tmp_path / "syncer" / "syncer-rounds.jsonl")
        assert [(r["task"], r["round"]) for r in rounds] == \
            [("0x" + t.hex(), r) for t in (first, second) for r in (0, 1)]
        assert len(list((tmp_path / "syncer").glob("syncer-*.pt"))) == 2
        metrics = runner.daemons["syncer"].metrics  # one gauge per run, labelled by task
        last = {r["task"]: r for r in rounds}  # the last round record of each run
        assert len(last) == 2
        for task, rec in last.items():
            assert metrics.round.labels(task=task)._value.get() == 1
            assert metrics.heldout_loss.labels(task=task)._value.get() == rec["heldout_loss"]
        for i in range(2):  # each trainer's round log: run 1 rounds 0, 1, then run 2 rounds 0, 1
            assert [r["round"] for r in read_jsonl(tmp_path / f"t{i}" / "trainer-rounds.jsonl")] == [0, 1, 0, 1]


def test_syncer_serves_a_second_run_while_the_first_waits_for_trainers(tmp_path, runner):
    """Run A is posted first and never fills (1 of 2 trainers); run B fills and trains. A syncer
    that served runs in turn would sit on A; this one seals B while A still waits."""
    with devnet_stack(tmp_path / "devnet") as dev:
        stuck = post_small_task(dev, trainers=2, quorum=2, fragments=2, rounds=1)
        dev.client(TRAINERS[2]).enroll_trainer(stuck, 100 * 10**18, "did:tenzro:machine:lonely")
        busy = post_small_task(dev, trainers=2, quorum=2, fragments=2, rounds=2)
        syncer = syncer_daemon(dev, None, tmp_path / "syncer", max_runs=None, discover_timeout_s=60)
        runner.start("syncer", syncer)
        for i, idx in enumerate(TRAINERS[:2]):
            runner.start(f"trainer{i}", trainer_daemon(dev, idx, busy, tmp_path / f"t{i}"))
        client = dev.client()
        deadline = time.monotonic() + 200
        while client.get_run(busy).status != RunStatus.SEALED:
            assert time.monotonic() < deadline, f"run B not sealed; daemons: {runner.results}"
            assert "syncer" not in runner.results, runner.results
            time.sleep(0.5)
        syncer.request_stop()
        results = runner.join(60)
        assert results == {"syncer": 0, "trainer0": 0, "trainer1": 0}
        a = client.get_run(stuck)
        assert a.status == RunStatus.ENROLLING and a.syncer == ZERO_ADDRESS  # no election before it trains
        assert {r["task"] for r in syncer.history} == {"0x" + busy.hex()}
        assert [r["round"] for r in syncer.history] == [0, 1]


def test_a_run_with_a_bad_spec_is_given_up_and_the_next_one_served(tmp_path, runner, caplog):
    """The first run posted names a CID whose bytes are not its spec (a SpecError). The
    syncer and the trainers, discovering runs, give it up with a logged reason and serve the
    next run to its seal instead of stopping."""
    import logging

    caplog.set_level(logging.ERROR, logger="tenzro.daemon")
    with devnet_stack(tmp_path / "devnet") as dev:
        not_the_spec = dev.ipfs().add(b'{"task_id": "something else"}')
        bad = post_small_task(dev, trainers=2, quorum=2, spec_cid=not_the_spec)
        good = post_small_task(dev, trainers=2, quorum=2, fragments=2, rounds=1)
        runner.start("syncer", syncer_daemon(dev, None, tmp_path / "syncer", discover_timeout_s=60))
        for i, idx in enumerate(TRAINERS[:2]):
            runner.start(f"trainer{i}", trainer_daemon(dev, idx, None, tmp_path / f"t{i}", discover_timeout_s=60))
        results = runner.join(200)
        assert results == {"syncer": 0, "trainer0": 0, "trainer1": 0}
        client = dev.client()
        assert client.get_run(good).status == RunStatus.SEALED
        assert client.get_run(bad).status == RunStatus.ENROLLING and client.get_run(bad).enrolled_count == 0
        given_up = [r.getMessage() for r in caplog.records if "giving up on run 0x" + bad.hex()[:16] in r.getMessage()]
        assert len(given_up) == 3 and all("SpecError" in m for m in given_up), given_up  # syncer + 2 trainers
