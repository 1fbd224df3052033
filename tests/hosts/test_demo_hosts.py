"""`make demo-hosts` at the smallest scale that still has 4 trainer hosts (4 fragments, 2 rounds, 8
inner steps): every party on its own host (tenzro_operator.demo_hosts, issue 25). Checks the run
sealed, the receipt verified (on-chain verifier and a replay from the watcher's host), every host's
link counted bytes both ways, each block a node fetched arrived once, the output's two last lines are there and parse, every accepted
payload was fetched across the link (on the syncer's node, pinned only by its own trainer's node),
and no namespace is left. One fault rides along (issue 25): trainer3's host is cut when round 1 (index 0)
opens and restored when round 2 opens: the run goes on with the other three, and trainer3 rejoins. Slow (7 Helia nodes, anvil, 6 daemons); skips where namespaces are not
available (not root, no iproute2)."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from tenzro_operator import demo, demo_hosts
from tenzro_operator.demo import DemoSettings
from tenzro_operator.demo_hosts import HostsSettings, run_demo_hosts
from tenzro_operator.netns import family_namespaces, unavailable_reason

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))]

LAST = re.compile(r"bytes per trainer host per round \(measured on the link\): (\d+)\n"
                  r"ratio to synchronous data-parallel: (\d+(?:\.\d+)?)x\n$")


@pytest.fixture(scope="module")
def run(tmp_path_factory, monkeypatch_module):
    tmp = tmp_path_factory.mktemp("demo-hosts")
    out = io.StringIO()
    # the printed summary, as a user sees it; a new console, since undoing a patch of the shared one's
    # `file` would pin it to this worker's capture stream of the moment and blind later tests' capsys
    for module in (demo, demo_hosts):
        monkeypatch_module.setattr(module, "console", Console(file=out))
    s = DemoSettings(workdir=tmp / "work", out=tmp / "out", trainers=4, quorum=3, fragments=4, rounds=2,
                     inner_steps=8, batch_size=32, grace_window_ms=30_000, challenge_window_ms=15_000, timeout_s=600)
    summary = run_demo_hosts(s, HostsSettings(cut="trainer3", cut_rounds=(0, 1)))
    return summary, out.getvalue()


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_sealed_and_the_receipt_verifies_by_replay_from_the_watchers_host(run):
    summary, _ = run
    assert summary["receipt"]["verifier_ok"] and summary["receipt"]["replay_ok"]
    assert summary["receipt"]["replayed_from"].startswith("watcher (10.77.0.")
    assert summary["watcher"]["rounds_checked"] == 2 and summary["watcher"]["mismatches"] == 0
    assert len(summary["heldout"]) == 3  # initial weights + 2 sealed rounds


def test_every_host_counted_bytes_both_ways(run):
    summary, _ = run
    hosts = summary["network"]["hosts"]
    assert set(hosts) == {"chain", "syncer", "watcher", "trainer0", "trainer1", "trainer2", "trainer3"}
    assert all(h["tx_bytes"] > 0 and h["rx_bytes"] > 0 for h in hosts.values()), hosts
    # a trainer host sent at least its payloads and received at least the weights it trained on
    net = summary["network"]
    trainers = [hosts[f"trainer{i}"] for i in range(4)]
    assert sum(h["tx_bytes"] for h in trainers) >= net["codec_payload_bytes_per_trainer_round"] * 4 * 2
    assert min(h["rx_bytes"] for h in trainers) >= net["weights_bytes_per_round"]
    # each block a node fetched came once (only a block of at most 1 KiB, which a peer may send in
    # place of HAVE, from more than one peer); when every holder sent every block, about 80 % were copies
    assert all(h["bitswap_received_bytes"] >= net["weights_bytes_per_round"] for h in trainers), hosts
    assert all(h["bitswap_duplicate_bytes"] <= 0.01 * h["bitswap_received_bytes"] for h in hosts.values()), hosts


def test_output_ends_with_the_two_figures(run):
    summary, text = run
    m = LAST.search(text)
    assert m, text[-600:]
    n, ratio = int(m.group(1)), float(m.group(2))
    net = summary["network"]
    assert n == net["measured_bytes_per_trainer_host_round"] > 0
    assert ratio == pytest.approx(net["sync_dp_bytes_per_trainer_round"] / n, rel=0.01, abs=0.05)


def test_every_accepted_payload_was_fetched_across_the_link(run):
    summary, _ = run
    p = summary["network"]["payloads"]
    assert summary["network"]["syncer_node_pins_before_post"] == 0
    assert p["accepted"] >= 2 * 3 * 4  # 2 rounds x K=3 x 4 fragments at least
    assert p["fetched"] == p["accepted"] and p["not_fetched"] == []
    assert p["accepted"] == sum(t["accepted"] for t in summary["trainers"])


def test_no_namespace_is_left(run):
    summary, _ = run
    assert family_namespaces(summary["network"]["namespace_prefix"]) == []


def test_a_trainer_host_cut_for_a_round_misses_it_and_rejoins(run):
    summary, _ = run
    fault = summary["network"]["fault"]
    assert [(action, r) for action, r, _ in fault["events"]] == [("cut", 0), ("restore", 1)]
    credited = fault["credited_rounds"]
    assert credited["trainer3"] == [1], credited  # nothing in the round it was cut off, credited again after
    # the run went on without it: rounds 1 and 2 committed with the others' work (on a loaded machine one of
    # them may be late or scored out in a round, as without a cut: demo_hosts.md)
    others = [credited[f"trainer{i}"] for i in range(3)]
    assert any(0 in c for c in others) and any(1 in c for c in others), credited
    assert all(row["slashed_tnzo"] == 0 for row in summary["trainers"]), summary["trainers"]
