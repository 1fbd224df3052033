"""Issue 14, M5 and the chaos test: the daemons on a real devnet under a reorg that drops a
commit the syncer had saved, and under a hostile network (a fault proxy in front of anvil that
drops, delays, rate-limits and lags, and an IPFS node restarted mid-run). Both runs seal, nothing
is slashed, no transaction takes effect twice, and the tokens are conserved to the atto-unit;
under the hostile network every honest trainer is credited for every round."""

from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from faultproxy import FaultProxy
from roles_stack import TRAINERS, Runner, assert_tokens_conserved, events, post_small_task, syncer_daemon, trainer_daemon
from stack import TOKEN, Anvil, deploy_stack, free_port, fund
from tenzro_operator.chain import ChainClient, RunStatus
from tenzro_operator.ipfs import IpfsClient
from tenzro_operator.keys import anvil_account
from tenzro_operator.root_flow import committed_rounds

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _rpc(url: str, method: str, *params):
    body = requests.post(url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": list(params)},
                         timeout=30).json()
    assert "error" not in body, body
    return body["result"]


def _holdings(client: ChainClient) -> tuple[int, int]:
    """(token total supply, balances of accounts 0..9 + the registry's): a burn lowers both."""
    total = client.call("totalSupply", contract="TenzroToken")
    held = sum(client.token_balance(anvil_account(i).address) for i in range(10))
    return total, held + client.token_balance(client.registry.address)


def _check_honest_run(client: ChainClient, tid: bytes, trainers: list[str], rounds: int, fragments: int,
                      every_round: bool = True) -> None:
    """Sealed, nothing slashed or proven, one commit per round, one enrollment per trainer, tokens
    conserved (refunds + claims + syncer fees + the claims' floor dust == pool + stakes); with
    ``every_round`` each trainer accepted on every fragment of every round."""
    run = client.get_run(tid)
    assert run.status == RunStatus.SEALED
    assert all(client.trainer_stats(tid, t).slashed == 0 for t in trainers)
    assert events(client, tid, "StakeBurned") == [] and events(client, tid, "InvalidProven") == []
    # one effect per action: a round committed once, nothing discarded
    assert sorted(e["args"]["round"] for e in events(client, tid, "RoundCommitted")) == list(range(rounds))
    assert events(client, tid, "RoundsDiscarded") == []
    if every_round:
        committed = committed_rounds(client, tid, client.deployment.deploy_block, rounds)
        index = {t: client.trainers_of(tid).index(t) for t in trainers}
        for r, a in committed.items():
            assert all(int(a["acceptedBitmaps"][index[t]]) == (1 << fragments) - 1 for t in trainers), (r, a)
    assert len(events(client, tid, "TrainerEnrolled")) == len(trainers)
    assert_tokens_conserved(client, tid, len(trainers))  # nothing slashed: refunds + claims + fees + dust


@dataclass
class _Net:
    """What roles_stack's daemon helpers read: the RPC the daemons use (the proxy), IPFS, deployments."""

    rpc_url: str
    ipfs_url: str
    deployments: Path

    def client(self, index: int | None = None) -> ChainClient:
        return ChainClient(self.rpc_url, self.deployments, anvil_account(index) if index is not None else None)

    def ipfs(self) -> IpfsClient:
        return IpfsClient(self.ipfs_url)


@contextmanager
def _chain_and_ipfs(tmp: Path):
    """anvil + the IPFS node on free ports, contracts deployed, accounts 1..8 funded; the IPFS
    node's process handle and repo are yielded too, to restart it."""
    from tenzro_operator.ipfs.node import start_ipfs_node, stop_ipfs_node

    anvil = Anvil(tmp).start()
    port = free_port()
    node = {"proc": start_ipfs_node(tmp / "ipfs", port)}
    try:
        dep = tmp / "deployments.json"
        deploy_stack(anvil.url, dep)
        fund(anvil.url, dep, range(1, 9), 1_000_000 * TOKEN)
        yield anvil, dep, node, port
    finally:
        stop_ipfs_node(node["proc"])
        anvil.stop()


def test_a_reorg_that_drops_a_saved_commit_does_not_halt_the_syncer(tmp_path, caplog):
    """Syncer A commits round 0, saves it and exits; a reorg then replaces every block from that
    commit on (round 0 is open again). Syncer B, from the same state file, rebuilds from the chain
    and commits round 0 again instead of halting on a state ahead of the chain, and the run goes on
    to its seal. (The off-chain deliveries of round 0 went with A: B commits round 0 with what it
    can still get, possibly nothing once the round's deadline has passed; round 1 is whole.)"""
    with _chain_and_ipfs(tmp_path) as (anvil, dep, _node, port):
        net = _Net(anvil.url, f"http://127.0.0.1:{port}", dep)
        tid = post_small_task(net, trainers=2, quorum=2, fragments=2, rounds=2)
        client = net.client()
        runner = Runner()
        try:
            for i, idx in enumerate(TRAINERS[:2]):
                runner.start(f"trainer{i}", trainer_daemon(net, idx, tid, tmp_path / f"t{i}"))
            sdir = tmp_path / "syncer"
            assert syncer_daemon(net, tid, sdir, exit_after_rounds=1).run() == 0
            fin = events(client, tid, "RoundCommitted")
            assert [e["args"]["round"] for e in fin] == [0]
            depth = client.block_number() - fin[0]["block_number"] + 1
            _rpc(anvil.url, "anvil_reorg", depth, [])
            assert client.get_run(tid).current_round == 0 and events(client, tid, "RoundCommitted") == []
            caplog.set_level(logging.WARNING, logger="tenzro.syncer")
            b = syncer_daemon(net, tid, sdir)
            assert b.run() == 0
            assert "a reorg dropped a commit" in caplog.text
            assert [h["round"] for h in b.history] == [0, 1]
            assert runner.join(180) == {"trainer0": 0, "trainer1": 0}
        finally:
            runner.stop_all()
        _check_honest_run(client, tid, [net.client(i).address for i in TRAINERS[:2]], rounds=2, fragments=2,
                          every_round=False)
        last = committed_rounds(client, tid, client.deployment.deploy_block, 2)[1]
        assert [int(b) for b in last["acceptedBitmaps"]] == [0b11, 0b11]  # the round after the reorg is whole


def test_chaos_a_hostile_network_cannot_halt_starve_or_double_spend(tmp_path, caplog):
    """A syncer and three trainers run 4 rounds through a proxy that drops responses (sent
    transactions included), delays, answers 429 and lags the head by 3 blocks on a share of the
    requests; the IPFS node is restarted once mid-run. The run seals, the tokens are conserved
    exactly (nothing burned, nothing minted, the registry holds what the run owes), nobody honest
    is slashed and no transaction takes effect twice."""
    from tenzro_operator.ipfs.node import start_ipfs_node, stop_ipfs_node

    rounds, fragments = 4, 2
    with _chain_and_ipfs(tmp_path) as (anvil, dep, node, port), FaultProxy(anvil.url, seed=14) as proxy:
        direct = ChainClient(anvil.url, dep)
        before = _holdings(direct)
        net = _Net(proxy.url, f"http://127.0.0.1:{port}", dep)
        tid = post_small_task(_Net(anvil.url, net.ipfs_url, dep), trainers=3, quorum=2, fragments=fragments,
                              rounds=rounds, inner_steps=2, grace_window_ms=20_000)
        proxy.add("drop", method="eth_sendRawTransaction", times=None, probability=0.1)  # sent, answer lost
        proxy.add("status", status=429, times=None, probability=0.05)
        proxy.add("lag", blocks=3, times=None, probability=0.2)
        proxy.add("delay", seconds=0.3, times=None, probability=0.05)
        proxy.add("drop", times=None, probability=0.02)
        runner = Runner()
        restarted = threading.Event()

        def restart_ipfs_once():  # after round 1 is finalized, the IPFS node goes away for 3 s
            while direct.get_run(tid).current_round < 2 and not runner.stop.is_set():
                time.sleep(0.5)
            stop_ipfs_node(node["proc"])
            time.sleep(3.0)
            node["proc"] = start_ipfs_node(tmp_path / "ipfs", port)
            restarted.set()

        try:
            runner.start("syncer", syncer_daemon(net, tid, tmp_path / "syncer"))
            for i, idx in enumerate(TRAINERS[:3]):
                runner.start(f"trainer{i}", trainer_daemon(net, idx, tid, tmp_path / f"t{i}"))
            threading.Thread(target=restart_ipfs_once, daemon=True).start()
            results = runner.join(480)
        finally:
            runner.stop.set()
            runner.stop_all()
        assert results == {"syncer": 0, "trainer0": 0, "trainer1": 0, "trainer2": 0}, results
        assert restarted.is_set()
        fired = {r.action: r.fired for r in proxy.rules}
        assert all(fired[a] > 0 for a in ("drop", "status", "lag", "delay")), fired
        _check_honest_run(direct, tid, [direct.with_account(anvil_account(i)).address for i in TRAINERS[:3]],
                          rounds=rounds, fragments=fragments)
        assert _holdings(direct) == before  # no token burned or minted, none left the accounts and the registry
