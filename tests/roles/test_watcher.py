"""The watcher daemon and the syncer's fault flags on a real devnet (anvil + IPFS node + the
compiled contracts), every daemon in a thread of this process (`roles_stack.Runner`):

* a syncer that commits one wrong coordinate (``wrong_aggregate_at: [1, 0]``) is caught by a
  watcher without a key (it reports, it proves nothing) in round 1, fragment 0 only: the later
  rounds, built on the wrong weights, check out given their committed inputs;
* a syncer that leaves an off-chain submission out (``drop_submission``) commits a consistent
  round (a watcher in discovery mode finds nothing wrong with it); the trainer it left out sees
  the omission and delivers on-chain too from then on (the forced path), so it is credited again;
* a syncer that goes silent (``go_silent_at``) is replaced after ``syncerTimeout`` (chain time moved
  forward) by a second syncer, which commits the rest and seals; the silent one's bond is burned.

The module has a devnet of its own: the last test registers a second syncer candidate, which
must not be drawn for the runs of other test modules.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from roles_stack import (
    TRAINERS,
    Devnet,
    accepted_counts,
    devnet_stack,
    events,
    post_small_task,
    syncer_daemon,
    trainer_daemon,
)
from tenzro_operator.root_flow import committed_rounds
from stack import REPO, wait_until
from tenzro_operator.chain import ZERO_ADDRESS, RunStatus
from tenzro_operator.keys import anvil_account

pytestmark = pytest.mark.timeout(300)

SECOND_SYNCER = 8  # anvil account of the replacement syncer (funded by devnet_stack)


def test_syncer_fault_keys_and_watcher_config(tmp_path):
    from tenzro_operator.config import WatcherConfig, load_config
    from tenzro_operator.errors import ConfigError
    from tenzro_operator.roles.syncer import SyncerDaemonConfig

    cfg = load_config(_yaml(tmp_path, "s.yaml", fault={"wrong_aggregate_at": [1, 0], "go_silent_at": 2,
                                                       "drop_submission": [0, 1, 2]}), SyncerDaemonConfig)
    assert (cfg.fault.wrong_aggregate_at, cfg.fault.go_silent_at, cfg.fault.drop_submission) == ((1, 0), 2, (0, 1, 2))
    assert SyncerDaemonConfig().fault is None
    for bad in ({"wrong_aggregate_at": [1]}, {"drop_submission": [0, -1, 2]}, {"lie": True}, {"go_silent_at": -1},
                {"false_invalid_report": [0, 1]}):
        with pytest.raises(ConfigError, match="fault"):
            load_config(_yaml(tmp_path, "bad.yaml", fault=bad), SyncerDaemonConfig)
    example = load_config(REPO / "operator" / "examples" / "watcher.yaml", WatcherConfig)
    assert example.task_id is None and example.max_runs is None and example.keystore is None
    w = load_config(_yaml(tmp_path, "w.yaml", report_path="r.jsonl", task_id="t"), WatcherConfig)
    assert w.report_path == tmp_path / "r.jsonl"


@pytest.fixture(scope="module")
def wdev(tmp_path_factory):
    with devnet_stack(tmp_path_factory.mktemp("watcher-devnet")) as d:
        yield d


def watcher_daemon(dev: Devnet, task_id: bytes | None, data_dir: Path, **cfg):
    """A read-only watcher (no key); ``task_id`` None: it discovers runs (``max_runs`` in ``cfg``)."""
    from tenzro_operator.config import WatcherConfig
    from tenzro_operator.roles.watcher import WatcherDaemon

    config = WatcherConfig(node_rpc=dev.rpc_url, ipfs_api=dev.ipfs_url, deployments=dev.deployments,
                           task_id=task_id and "0x" + task_id.hex(), data_dir=data_dir, metrics_port=None,
                           poll_interval_s=0.3, **cfg)
    return WatcherDaemon(config, None, dev.client(), dev.ipfs())


def _start_trainers(dev, runner, tid, tmp_path, n=3):
    for i, idx in enumerate(TRAINERS[:n]):
        runner.start(f"trainer{i}", trainer_daemon(dev, idx, tid, tmp_path / f"t{i}"))


@pytest.mark.slow
def test_watcher_catches_a_wrong_aggregate_in_its_round_and_fragment_only(wdev, runner, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="tenzro.watcher")
    tid = post_small_task(wdev, trainers=3, quorum=2, fragments=2, rounds=3, inner_steps=2)
    runner.start("watcher", watcher_daemon(wdev, tid, tmp_path / "watcher"))
    runner.start("syncer", syncer_daemon(wdev, tid, tmp_path / "syncer", evaluate=False,
                                         fault={"wrong_aggregate_at": [1, 0]}))
    _start_trainers(wdev, runner, tid, tmp_path)
    results = runner.join(240)
    assert results == {"watcher": 0, "syncer": 0, "trainer0": 0, "trainer1": 0, "trainer2": 0}
    assert wdev.client().get_run(tid).status == RunStatus.SEALED

    w = runner.daemons["watcher"]
    # every round checked in order; only round 1 differs; rounds 0 and 2 (built on the wrong weights of
    # round 1) match, given their committed inputs
    assert w.checked == [(tid, 0, True), (tid, 1, False), (tid, 2, True)]
    assert [(f.round, f.fragments) for f in w.findings] == [(1, [0])]
    f = w.findings[0]
    assert [m.what for m in f.mismatches] == ["round 1 fragment 0"] and "coordinate 0" in f.mismatches[0].got
    assert not events(wdev.client(), tid, "RoundProvenWrong")  # a watcher without a key proves nothing
    assert f.syncer == anvil_account(2).address and f.tx and f.block > 0
    # one clear log line and one report record
    lines = [r.getMessage() for r in caplog.records if r.name == "tenzro.watcher" and "MISMATCH" in r.getMessage()]
    assert len(lines) == 1 and f"run 0x{tid.hex()} round 1 fragment 0:" in lines[0], lines
    report = [json.loads(ln) for ln in (tmp_path / "watcher" / "watcher-mismatches.jsonl").read_text().splitlines()]
    assert [(r["task"], r["round"], r["fragments"]) for r in report] == [("0x" + tid.hex(), 1, [0])]
    # metrics, per task
    task = "0x" + tid.hex()
    m = w.metrics
    assert m.rounds_checked.labels(task=task)._value.get() == 3
    assert m.mismatches.labels(task=task)._value.get() == 1
    assert m.lag_blocks.labels(task=task)._sum.get() >= 0 and m.round.labels(task=task)._value.get() == 2
    # the off-chain replay of the sealed run names the same round (and the receipt it leads to)
    from tenzro_operator.replay import verify_receipt

    rep = verify_receipt(wdev.client(), wdev.ipfs(), tid)
    assert [r.round for r in rep.rounds if not r.ok] == [1]
    # the CLI (a process of its own, no keystore) watches the sealed run to its end: the same finding
    cfg = _yaml(tmp_path, "watcher.yaml", node_rpc=wdev.rpc_url, ipfs_api=wdev.ipfs_url,
                deployments=wdev.deployments, data_dir=tmp_path / "cli-watcher", metrics_port=0)
    p = _cli(cfg, "--task-id", "0x" + tid.hex())
    assert p.returncode == 0, p.stderr[-2000:]
    assert sum("MISMATCH" in ln for ln in p.stderr.splitlines()) == 1 and "Traceback" not in p.stderr
    report = (tmp_path / "cli-watcher" / "watcher-mismatches.jsonl").read_text().splitlines()
    assert [(r["round"], r["fragments"]) for r in map(json.loads, report)] == [(1, [0])]


@pytest.mark.slow
def test_watcher_cli_errors_are_one_line(wdev, tmp_path):
    from stack import free_port

    cfg = _yaml(tmp_path, "watcher.yaml", node_rpc=wdev.rpc_url, ipfs_api=f"http://127.0.0.1:{free_port()}",
                deployments=wdev.deployments, data_dir=tmp_path / "w", metrics_port=None, outage_tolerance_s=0)
    p = _cli(cfg, "--task-id", "0x" + "ab" * 32)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert p.stderr.strip().splitlines()[-1].startswith("Error: "), p.stderr[-2000:]
    p = _cli(_yaml(tmp_path, "bad.yaml", max_runs=0))
    assert p.returncode == 1 and p.stderr.strip().splitlines()[-1].startswith("Error: config "), p.stderr


def _yaml(tmp_path: Path, name: str, **fields) -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump({k: (str(v) if isinstance(v, Path) else v) for k, v in fields.items()}))
    return p


def _cli(config: Path, *args: str) -> subprocess.CompletedProcess:
    """``tenzro watcher run --config CONFIG ARGS`` in a process of its own."""
    return subprocess.run([sys.executable, "-m", "tenzro_operator.cli", "watcher", "run", "--config", str(config),
                           *args], cwd=REPO, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_false_invalid_report_is_refused_and_nobody_is_slashed(wdev, runner, tmp_path, caplog):
    """A syncer reports an honest trainer's valid (forced) submission as a norm outlier: the
    registry checks the evidence and refuses, nobody is slashed and the run seals with every honest
    submission accepted."""
    caplog.set_level(logging.WARNING, logger="tenzro.syncer")
    tid = post_small_task(wdev, trainers=3, quorum=2, fragments=2, rounds=2, inner_steps=2)
    runner.start("syncer", syncer_daemon(wdev, tid, tmp_path / "syncer", evaluate=False, straggler_wait_s=30.0,
                                         fault={"false_invalid_report": [0, 1, 2]}))
    _start_trainers(wdev, runner, tid, tmp_path)
    assert runner.join(240) == {"syncer": 0, "trainer0": 0, "trainer1": 0, "trainer2": 0}
    client = wdev.client()
    assert client.get_run(tid).status == RunStatus.SEALED
    msgs = [r.getMessage() for r in caplog.records if r.name == "tenzro.syncer"]
    refused = [m for m in msgs if "refused the false report" in m]
    assert len(refused) == 1 and "Registry__" in refused[0], msgs
    assert events(client, tid, "InvalidProven") == [] and events(client, tid, "TrainerSlashed") == []
    accepted = accepted_counts(client, tid)
    assert [accepted[anvil_account(idx).address] for idx in TRAINERS[:3]] == [4, 4, 4]


@pytest.mark.slow
def test_a_dropped_submission_sends_its_trainer_to_the_forced_path_and_the_run_seals(wdev, runner, tmp_path,
                                                                                    caplog):
    caplog.set_level(logging.WARNING, logger="tenzro.syncer")
    caplog.set_level(logging.WARNING, logger="tenzro.watcher")
    tid = post_small_task(wdev, trainers=3, quorum=2, fragments=2, rounds=2, inner_steps=2)
    # discovery mode: the only run posted from now on
    runner.start("watcher", watcher_daemon(wdev, None, tmp_path / "watcher", max_runs=1))
    runner.start("syncer", syncer_daemon(wdev, tid, tmp_path / "syncer", evaluate=False, straggler_wait_s=30.0,
                                         fault={"drop_submission": [0, 1, 2]}))
    _start_trainers(wdev, runner, tid, tmp_path)
    results = runner.join(240)
    assert results == {"watcher": 0, "syncer": 0, "trainer0": 0, "trainer1": 0, "trainer2": 0}
    client = wdev.client()
    assert client.get_run(tid).status == RunStatus.SEALED
    msgs = [r.getMessage() for r in caplog.records if r.name == "tenzro.syncer"]
    assert any("FAULT INJECTION: leaving trainer 2's live submission of fragment 1 out of round 0" in m
               for m in msgs), msgs
    # round 0 left trainer 2's fragment 1 out; it delivered on-chain too from then on, and round 1
    # (which the fault leaves alone) credits everything
    rounds = committed_rounds(client, tid, client.deployment.deploy_block, 2)
    index = client.trainers_of(tid).index(anvil_account(TRAINERS[2]).address)
    assert int(rounds[0]["acceptedBitmaps"][index]) == 0b01
    assert [int(b) for b in rounds[1]["acceptedBitmaps"]] == [0b11, 0b11, 0b11]
    assert runner.daemons["trainer2"].forced
    forced = {e["args"]["trainer"] for e in events(client, tid, "GradientSubmitted")}
    assert forced == {anvil_account(TRAINERS[2]).address}  # only the trainer left out went on-chain
    assert runner.daemons["syncer"].summary["rounds_finalized"] == 2
    # a watcher finds nothing wrong: the round is what its commit says (leaving an off-chain
    # submission out is the trainer's to answer, by the forced path)
    w = runner.daemons["watcher"]
    assert list(w.watches) == [tid]
    assert w.checked == [(tid, 0, True), (tid, 1, True)] and w.findings == []
    assert not (tmp_path / "watcher" / "watcher-mismatches.jsonl").exists()


@pytest.mark.slow
def test_silent_syncer_is_replaced_after_the_timeout(wdev, runner, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="tenzro.syncer")
    tid = post_small_task(wdev, trainers=3, quorum=2, fragments=2, rounds=2, inner_steps=2, grace_window_ms=10_000)
    client = wdev.client(0)
    silent = syncer_daemon(wdev, tid, tmp_path / "silent", evaluate=False, fault={"go_silent_at": 1})
    runner.start("silent", silent)
    _start_trainers(wdev, runner, tid, tmp_path)
    # the second candidate registers only once the silent one is elected (else either could be drawn)
    wait_until(lambda: client.get_run(tid).syncer == silent.account.address, 120, "the first syncer's election")
    from tenzro_operator.roles.syncer import SyncerDaemon, SyncerDaemonConfig

    cfg = SyncerDaemonConfig(node_rpc=wdev.rpc_url, ipfs_api=wdev.ipfs_url, deployments=wdev.deployments,
                             task_id="0x" + tid.hex(), data_dir=tmp_path / "second", metrics_port=None,
                             poll_interval_s=0.3, register_stake="100", evaluate=False, straggler_wait_s=1.0)
    runner.start("second", SyncerDaemon(cfg, anvil_account(SECOND_SYNCER), wdev.client(SECOND_SYNCER), wdev.ipfs()))
    # round 1 opens; every trainer delivers; the syncer stays silent
    wait_until(lambda: client.get_run(tid).current_round == 1 and
               all(1 in runner.daemons[f"trainer{i}"]._outbox for i in range(3)), 120, "round 1's deliveries")
    run = client.get_run(tid)
    assert run.current_round == 1 and run.syncer == silent.account.address
    # move chain time past syncerReplaceableAt (round deadline + syncerTimeout) instead of waiting for it
    client.mine(seconds=max(1, run.syncer_replaceable_at - client.block_timestamp("latest") + 2))
    results = runner.join(180)
    assert results == {"silent": 0, "trainer0": 0, "trainer1": 0, "trainer2": 0, "second": 0}
    run = client.get_run(tid)
    assert run.status == RunStatus.SEALED
    elected = [e["args"] for e in events(client, tid, "SyncerElected")]
    second = anvil_account(SECOND_SYNCER).address
    assert [(e["syncer"], e["previous"]) for e in elected] == [(silent.account.address, ZERO_ADDRESS),
                                                               (second, silent.account.address)]
    assert elected[1]["previousSlashed"] == run.syncer_bond > 0  # the silent syncer's bond, burned
    assert silent.summary["rounds_finalized"] == 1 and runner.daemons["second"].summary["rounds_finalized"] == 1
    assert any("FAULT INJECTION: going silent at round 1" in r.getMessage() for r in caplog.records)
