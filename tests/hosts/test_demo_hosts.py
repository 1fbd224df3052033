"""`make demo-hosts` at the smallest scale that still has 4 trainer hosts (4 fragments, 2 rounds, 8
inner steps): every party on its own host (tenzro_operator.demo_hosts, issue 25). Checks the run
sealed, the receipt verified (on-chain verifier and a replay from the watcher's host), every host's
link counted bytes both ways, the copies among the blocks a node fetched stay far below every holder
sending every block, the output's two last lines are there and parse, every accepted
payload was fetched across the link (on the node of the syncer that committed its round, pinned only
by its own trainer's node), and no namespace is left. Three faults ride along (issue 25): trainer3's
host is cut when round 1 (index 0) opens and restored when round 2 opens (the run goes on with the
other three, and trainer3 rejoins); in round 2 the elected syncer's host is cut when the commit
phase closes, and the stand-in syncer on a host of its own takes the run over and commits the round
with what the trainers delivered; 3 s later trainer1's IPFS node is killed (SIGKILL; its trainer has
pinned and revealed), so its payloads are unavailable to the stand-in (rejected ``Unavailable``, no
one slashed), and it is restarted on its repo after the seal with its pins. Slow (8 Helia nodes, anvil, 7 daemons); skips where namespaces are not available (not
root, no iproute2).""" 

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
    # grace 40 s, reveal min(15, 20) = 15 s: a 25-s commit phase, in which trainer3, back when the harness
    # sees round 2 open (polled each second), gets its RPC answered, its node's peers redialled, the
    # weights fetched, 8 steps trained and its payloads pinned and committed under the CI's load (with a
    # 15-s phase it finished 1 s late on a loaded machine: the peers were redialled 10 s after the link
    # came back; the daemon now redials at once, `Daemon.guarded`)
    s = DemoSettings(workdir=tmp / "work", out=tmp / "out", trainers=4, quorum=3, fragments=4, rounds=2,
                     inner_steps=8, batch_size=32, grace_window_ms=40_000, challenge_window_ms=15_000, timeout_s=600)
    summary = run_demo_hosts(s, HostsSettings(cuts=(("trainer3", 0, 1), ("syncer", 1, 2)),
                                              node_kills=(("trainer1", 1, 2),)))
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
    assert set(hosts) == {"chain", "syncer", "watcher", "trainer0", "trainer1", "trainer2", "trainer3", "standin"}
    assert all(h["tx_bytes"] > 0 and h["rx_bytes"] > 0 for h in hosts.values()), hosts
    # a trainer host sent at least its payloads and received at least the weights it trained on
    net = summary["network"]
    trainers = [hosts[f"trainer{i}"] for i in range(4)]
    assert sum(h["tx_bytes"] for h in trainers) >= net["codec_payload_bytes_per_trainer_round"] * 4 * 2
    assert min(h["rx_bytes"] for h in trainers) >= net["weights_bytes_per_round"]
    # each node's bitswap took at least a round's weights (trainer1's counts from its restart after the seal)
    assert all(h["bitswap_received_bytes"] >= net["weights_bytes_per_round"] for n, h in hosts.items()
               if n.startswith("trainer") and n != "trainer1"), hosts
    # one copy of each block is what tests/ipfs/test_bitswap.py checks; here, under load, a block whose
    # holders do not answer the WANT-HAVE round in time (3 s), or whose holder does not send it in time,
    # is wanted from every peer, and the late copies come too: 0.1 % on an idle machine, 1.2 % once on
    # a trainer node of an 8-round run, 15.5 % on one under the clean-clone CI's load. The bound only
    # tells this apart from every holder sending every block (about 80 % copies)
    assert all(h["bitswap_duplicate_bytes"] <= 0.5 * h["bitswap_received_bytes"] for h in hosts.values()), hosts


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
    fault = summary["network"]["faults"][0]
    assert fault["host"] == "trainer3" and fault["fault"] == "cut"
    assert [(action, r) for action, r, _ in fault["events"]] == [("cut", 0), ("restore", 1)]
    credited = summary["network"]["credited_rounds"]
    assert credited["trainer3"] == [1], credited  # nothing in the round it was cut off, credited again after
    # the run went on without it: rounds 1 and 2 committed with the others' work (on a loaded machine one of
    # them may be late or scored out in a round, as without a cut: demo_hosts.md)
    others = [credited[f"trainer{i}"] for i in range(3)]
    assert any(0 in c for c in others) and any(1 in c for c in others), credited
    assert all(row["slashed_tnzo"] == 0 for row in summary["trainers"]), summary["trainers"]


def test_the_elected_syncers_host_cut_mid_run_the_stand_in_commits_the_round_and_nothing_is_lost(run):
    summary, _ = run
    net = summary["network"]
    fault = net["faults"][1]
    cut = fault["host"]  # whichever candidate the election drew
    assert cut in ("syncer", "standin") and fault["fault"] == "cut"
    # cut in round 2 (at its commit phase's close), back only after the seal (its daemon then finds the
    # run over and exits 0)
    assert [(action, r) for action, r, _ in fault["events"]] == [("cut", 1), ("restore", 2)]
    other = {"syncer": "standin", "standin": "syncer"}[cut]
    assert net["committed_by"] == {0: cut, 1: other}
    # round 2 lost nothing: the stand-in held what the trainers delivered while the cut syncer served
    # it, so its transcript judges their submissions (trainer1's as Unavailable: its node was killed)
    # and credits the others (all three in each run so far; on a loaded machine one may be late or
    # scored out, as in any round); nobody honest is slashed; the cut syncer's bond is the one burned
    judged = {v["trainer"] for v in net["verdicts"] if v["round"] == 1}
    assert "trainer1" in judged and len(judged) >= 3, net["verdicts"]
    credited = [h for h, c in net["credited_rounds"].items() if 1 in c]
    assert "trainer1" not in credited and len(credited) >= 2, net["credited_rounds"]
    assert all(row["slashed_tnzo"] == 0 for row in summary["trainers"]), summary["trainers"]
    assert int(summary["accounting"]["burned"]) == summary["settings"]["syncer_bond"]
    assert summary["accounting"]["conserved"] is True


def test_a_trainer_node_killed_after_it_revealed_loses_that_round_only_and_keeps_its_pins(run):
    summary, _ = run
    net = summary["network"]
    fault = net["faults"][2]
    assert fault["host"] == "trainer1" and fault["fault"] == "node killed"
    assert [(action, r) for action, r, _ in fault["events"]] == [("node killed", 1), ("restore", 2)]
    mine = [v for v in net["verdicts"] if v["trainer"] == "trainer1"]
    # round 1: its four payloads accepted; round 2: revealed, then unfetchable from every node (the stand-in
    # fetched only after its election): rejected Unavailable, which costs it nothing but the round's credit
    assert sorted(v["fragment"] for v in mine if v["round"] == 0 and v["verdict"] == "accepted") == [0, 1, 2, 3]
    assert sorted((v["fragment"], v["verdict"]) for v in mine if v["round"] == 1) == [
        (f, "Unavailable") for f in range(4)], mine
    assert net["credited_rounds"]["trainer1"] == [0]
    # its node, killed and restarted on its repo, still pins what it pinned: both rounds' payloads
    assert all(v["pinned_by_owner"] for v in mine), mine
    assert all(r["slashed_tnzo"] == 0 for r in summary["trainers"]), summary["trainers"]
