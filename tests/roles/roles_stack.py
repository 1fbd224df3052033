"""Fixtures of the daemon tests: a real devnet (anvil + the Helia IPFS node, free ports, temp
dir, `tenzro_operator.devnet.up`), the real compiled contracts deployed on it, funded role
accounts, a small real timeseries task posted by the sponsor helpers, and a runner that starts
the trainer and syncer daemons in threads.

Deployment: `stack.deploy_stack` (ape's build artifacts through web3, in the record shape that
``ape run deploy`` writes; ``ape run deploy`` itself took over four minutes on this machine).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch

from stack import TOKEN, deploy_stack, free_port, fund
from stack import small_dataset as _small_dataset
from tenzro_operator import devnet
from tenzro_operator.chain import ChainClient, RunStatus
from tenzro_operator.ipfs import IpfsClient
from tenzro_operator.keys import anvil_account
from tenzro_operator.logs import log_context

SPONSOR, SYNCER = 1, 2
TRAINERS = (3, 4, 5, 6, 7)

torch.set_num_threads(1)


@dataclass
class Devnet:
    cfg: devnet.DevnetConfig
    deployments: Path

    @property
    def rpc_url(self) -> str:
        return self.cfg.rpc_url

    @property
    def ipfs_url(self) -> str:
        return self.cfg.ipfs_url

    def client(self, index: int | None = None) -> ChainClient:
        return ChainClient(self.rpc_url, self.deployments, anvil_account(index) if index is not None else None)

    def ipfs(self) -> IpfsClient:
        return IpfsClient(self.ipfs_url)


@contextmanager
def devnet_stack(tmp: Path) -> Iterator[Devnet]:
    """A devnet of its own: anvil + IPFS on free ports under ``tmp``, contracts deployed, accounts
    1..8 funded with 1,000,000 TNZO each; stopped on exit."""
    cfg = devnet.DevnetConfig(data_dir=tmp, rpc_port=free_port(), ipfs_port=free_port())
    devnet.up(cfg)
    try:
        dep = tmp / "deployments.json"
        deploy_stack(cfg.rpc_url, dep)
        fund(cfg.rpc_url, dep, range(1, 9), 1_000_000 * TOKEN)
        yield Devnet(cfg, dep)
    finally:
        devnet.down(cfg)


@pytest.fixture(scope="session")
def dev(tmp_path_factory) -> Iterator[Devnet]:
    """One devnet for the session (`devnet_stack`)."""
    with devnet_stack(tmp_path_factory.mktemp("devnet")) as d:
        yield d




def small_dataset(n_series: int = 6):
    """A few real series of the default collection (`stack.small_dataset`), 6 by default."""
    return _small_dataset(n_series)


_n = {"i": 0}


def post_small_task(dev: Devnet, *, trainers: int = 3, quorum: int = 2, fragments: int = 2, rounds: int = 2,
                    inner_steps: int = 3, grace_window_ms: int = 16_000, spec_cid: str | None = None,
                    **extra) -> bytes:
    """The sponsor (anvil 1) pins a real dataset and a tiny model's initial weights and posts the
    task (`roles.sponsor.build_spec` + `post_task`). Returns the task id (bytes32).
    ``spec_cid``: post this CID instead of the spec's (a run whose spec cannot be fetched).
    Windows short enough for a test: by default a 16 s grace window and a 4 s challenge window
    (a 12 s commit phase, a 4 s reveal phase; the seal waits 4 s after the last commit)."""
    extra.setdefault("challenge_window_ms", 4_000)
    from tenzro_operator.roles.sponsor import SpecDraft, build_spec, post_task

    _n["i"] += 1
    sponsor = dev.client(SPONSOR)
    draft = SpecDraft(task_id=f"roles-{os.getpid()}-{_n['i']}-{time.time_ns()}", sponsor_address=sponsor.address,
                      model_metadata={"preset": "demo", "d_model": 32, "n_layers": 1, "d_ff": 64},
                      fragment_count=fragments, trainer_count=trainers, quorum=quorum, inner_steps=inner_steps,
                      max_rounds=rounds, grace_window_ms=grace_window_ms, reward_pool=1_000 * TOKEN,
                      min_stake=100 * TOKEN, **extra)
    ipfs = dev.ipfs()
    spec = build_spec(ipfs, draft, small_dataset())
    if spec_cid is not None:
        sponsor.post_task(spec, spec_cid)
        return spec.task_id_bytes
    tid, _ = post_task(sponsor, ipfs, spec)
    return tid


@dataclass
class Runner:
    """Daemons in threads; each thread records its return value or exception."""

    threads: list[threading.Thread] = field(default_factory=list)
    results: dict[str, Any] = field(default_factory=dict)
    daemons: dict[str, Any] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)

    def start(self, name: str, daemon) -> None:
        self.daemons[name] = daemon

        def target():
            try:
                self.results[name] = daemon.run()
            except BaseException as exc:  # noqa: BLE001 - reported by join()
                self.results[name] = exc

        t = threading.Thread(target=target, name=name, daemon=True)
        self.threads.append(t)
        t.start()

    def join(self, timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))
        alive = [t.name for t in self.threads if t.is_alive()]
        if alive:
            for d in self.daemons.values():
                d.request_stop()
            for t in self.threads:
                t.join(10)
            raise AssertionError(f"daemons still running after {timeout_s:.0f} s: {alive}; results {self.results}")
        return self.results

    def stop_all(self) -> None:
        for d in self.daemons.values():
            d.request_stop()
        for t in self.threads:
            t.join(15)


@pytest.fixture
def runner():
    r = Runner()
    yield r
    r.stop_all()


def trainer_daemon(dev: Devnet, index: int, task_id: bytes | None, data_dir: Path, **cfg):
    """A trainer daemon as anvil account ``index``; ``task_id`` None: it discovers runs."""
    from tenzro_operator.roles.trainer import TrainerDaemon, TrainerDaemonConfig

    cfg.setdefault("syncer_rpc_allow_private", True)  # the devnet's syncer announces a 127.0.0.1 endpoint
    config = TrainerDaemonConfig(node_rpc=dev.rpc_url, ipfs_api=dev.ipfs_url, deployments=dev.deployments,
                                 task_id=task_id and "0x" + task_id.hex(), data_dir=data_dir, metrics_port=None,
                                 poll_interval_s=0.3, inner={"batch_size": 16}, **cfg)
    acct = anvil_account(index)
    return TrainerDaemon(config, acct, dev.client(index), dev.ipfs())


def syncer_daemon(dev: Devnet, task_id: bytes | None, data_dir: Path, account: int = SYNCER, **cfg):
    """The syncer daemon as anvil account ``account`` (`SYNCER`); ``task_id`` None: it discovers runs."""
    from tenzro_operator.roles.syncer import SyncerDaemon, SyncerDaemonConfig

    cfg.setdefault("straggler_wait_s", 1.0)
    cfg.setdefault("register_stake", "100")  # bonds of 10 runs
    config = SyncerDaemonConfig(node_rpc=dev.rpc_url, ipfs_api=dev.ipfs_url, deployments=dev.deployments,
                                task_id=task_id and "0x" + task_id.hex(), data_dir=data_dir, metrics_port=None,
                                poll_interval_s=0.3, **cfg)
    return SyncerDaemon(config, anvil_account(account), dev.client(account), dev.ipfs())


def accepted_counts(client: ChainClient, task_id: bytes) -> dict[str, int]:
    """Accepted fragment submissions per trainer (checksummed address) of run ``task_id``, summed
    over its committed rounds' bitmaps (`tenzro_operator.views.run`: the registry keeps roots only)."""
    from tenzro_operator.views.run import build

    return {t.trainer: t.accepted for t in build(client, task_id).trainers}


def assert_tokens_conserved(client: ChainClient, task_id: bytes, enrolled: int, stake: int = 100 * TOKEN) -> None:
    """A sealed run's tokens balance: pool + stakes == stake refunds + claimed rewards + syncer fees +
    trainer slashes + the claims' floor dust (under one atto-unit per trainer, left for the
    sponsor's sweep)."""
    run = client.get_run(task_id)
    refunds = sum(e["args"]["stakeRefund"] for e in events(client, task_id, "PayoutCredited"))
    claims = sum(e["args"]["reward"] for e in events(client, task_id, "RewardClaimed"))
    slashed = sum(e["args"]["amount"] for e in events(client, task_id, "TrainerSlashed"))
    claimable = events(client, task_id, "RootRunSealed")[0]["args"]["claimable"]
    assert 0 <= claimable - claims < enrolled
    assert refunds + claimable + run.syncer_fees_accrued + slashed == run.reward_pool + enrolled * stake


def events(client: ChainClient, task_id: bytes, name: str) -> list:
    """Every ``name`` event of run ``task_id`` since the deployment (decoded, in chain order)."""
    return client.get_logs(client.deployment.deploy_block, client.block_number(), [name], task_id=task_id)


def fail_first_fetch(syncer, client: ChainClient, task_id: bytes, trainer: str, always: bool = False) -> list[str]:
    """Make ``syncer``'s first IPFS fetch of a payload ``trainer`` submitted on-chain fail
    (IpfsNotFound: its node lost the request), every later fetch go through (``always``: every
    fetch of that CID fails, as when no reachable node serves it); returns the list each failed
    fetch's CID is appended to. Thread-safe (the syncer fetches on a thread pool)."""
    from tenzro_operator.errors import IpfsNotFound

    original, failed, lock = syncer.ipfs.cat, [], threading.Lock()

    def cat_failing(cid, **kw):
        with lock:
            fail = (cid in failed and always) or (not failed and any(
                e["args"]["cid"] == cid and e["args"]["trainer"] == trainer
                for e in events(client, task_id, "GradientSubmitted")))
            if fail:
                failed.append(cid)
        if fail:
            raise IpfsNotFound(cid, "injected: no node serves it" if always else "injected: the node lost the first request")
        return original(cid, **kw)

    syncer.ipfs.cat = cat_failing
    return failed


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def collecting(dev, tmp_path):
    """A 2-trainer, 2-fragment root-flow run in round 0's commit phase (60 s grace window), and a
    syncer that has prepared it and collected once with its endpoint on a free port: (syncer, run,
    task id, the trainers' clients). The syncer's endpoint is released and the log context restored
    at the end."""
    with log_context():  # the syncer sets its task and round in the log context: restored after the test
        tid = post_small_task(dev, trainers=2, quorum=2, fragments=2, rounds=1, grace_window_ms=60_000,
                              challenge_window_ms=4_000)
        trainers = [dev.client(TRAINERS[k]) for k in range(2)]
        for c in trainers:
            c.enroll_trainer(tid, 100 * TOKEN, f"did:tenzro:machine:{c.address}")
        s = syncer_daemon(dev, tid, tmp_path / "syncer", evaluate=False, submission_rpc_port=0)
        run = s.open_task(tid)
        assert run.status == RunStatus.TRAINING
        s._open_round(run)
        assert s.root_collect(run, s._round.closes) == []  # in the commit phase: nothing to validate yet
        try:
            yield s, run, tid, trainers
        finally:
            s.root_close()
