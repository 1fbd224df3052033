"""`tenzro explorer` over HTTP against the replay suite's devnet (real anvil, real IPFS node) and
its sealed root-flow runs: the pages show the chain's own figures (the registry's getters, and
what its ``RoundCommitted``, ``RootRunSealed`` and ``RewardClaimed`` events say: in the root flow
a run's bitmaps, credits and claims live in its events), every page has a JSON twin, attacker-
controlled spec text is escaped, unknown runs are 404s, and a dead RPC or IPFS node is a clear
error page, never a traceback.

The explorer runs as the real command (``python -m tenzro_operator.cli explorer``) on a free port.
The held-out loss comes from a file in the syncer's ``syncer-rounds.jsonl`` format: the replay
runs are played without the syncer daemon, which is what writes that file."""

from __future__ import annotations

import json
import os
import threading
import time

import httpx
import pytest

import run_driver as drv
from explorer_proc import explorer_process
from stack import free_port
from tenzro_operator.explorer.server import Explorer, ExplorerServer
from tenzro_operator.explorer.sources import ChainSource, SpecCache, SyncerRecords
from tenzro_operator.ipfs import IpfsClient
from tenzro_operator.roles.sponsor import SpecDraft, build_spec, post_task
from tenzro_operator.units import format_tokens

HOSTILE = '<script>alert("owned")</script>'
LOSSES = {0: (1.25, 0.875), 1: (None, 0.5)}  # round: (loss before, loss after); the syncer's format


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    return tmp_path_factory.mktemp("explorer") / "syncer-rounds.jsonl"


@pytest.fixture(scope="module")
def explorer(stack, records):
    """Base URL of a `tenzro explorer` process on a free port (stopped after the module)."""
    with explorer_process(stack, "--syncer-rounds", str(records), "--refresh", "3") as url:
        yield url


def _get(url: str, path: str, status: int = 200) -> httpx.Response:
    r = httpx.get(url + path, timeout=60)
    assert r.status_code == status, (path, r.status_code, r.text[:500])
    assert "Traceback" not in r.text
    return r


def _html(url: str, path: str, status: int = 200) -> str:
    r = _get(url, path, status)
    assert r.headers["content-type"].startswith("text/html")
    assert "script-src" not in r.headers["content-security-policy"]  # default-src 'none': no script runs
    return r.text


def _api(url: str, path: str, status: int = 200) -> dict:
    r = _get(url, path, status)
    assert r.headers["content-type"] == "application/json"
    return r.json()


@pytest.mark.slow
def test_sealed_run_pages_show_the_chains_figures(stack, honest_run, explorer, records):
    tid = "0x" + honest_run.task_id.hex()
    records.write_text("".join(json.dumps({"task": tid, "round": r, "heldout_loss": after, "accepted": 4,
                                           **({"heldout_loss_before": before} if before is not None else {})}) + "\n"
                               for r, (before, after) in LOSSES.items()))
    chain = stack.chain()
    run = chain.get_run(honest_run.task_id)

    listing = _api(explorer, "/api/runs")
    row = next(r for r in listing["runs"] if r["task_id"] == tid)
    assert (row["name"], row["status"], row["trainer_count"], row["quorum"], row["fragment_count"]) == \
        ("replay-honest", "SEALED", 2, 2, 2)
    assert (row["current_round"], row["max_rounds"], row["reward_pool"]) == (run.current_round, 2, str(run.reward_pool))
    page = _html(explorer, "/")
    assert tid in page and "replay-honest" in page and f'href="/runs/{tid}"' in page

    doc = _api(explorer, f"/api/runs/{tid}")
    assert {k: v for k, v in doc["run"].items() if not k.endswith("_iso")} == json.loads(json.dumps(run.to_json()))
    assert doc["run"]["posted_at_iso"].endswith("Z")
    assert doc["spec"]["task_id"] == "replay-honest" and doc["live"] is False
    assert [t["trainer"].lower() for t in doc["trainers"]] == [a.lower() for a in chain.trainers_of(honest_run.task_id)]
    # the chain's figures: the committed bitmaps (accepted fragments, credits), the seal's claimable
    # pool and the claims the trainers made; the registry's getters for stake, misses and slashes
    bitmaps = [list(e["acceptedBitmaps"]) for _, e in sorted(drv.committed(chain, honest_run.task_id).items())]
    sizes = run.fragment_sizes
    (sealed,) = drv.events_named(chain, honest_run.task_id, "RootRunSealed")
    claims = {c["index"]: c["reward"] for c in drv.events_named(chain, honest_run.task_id, "RewardClaimed")}
    for i, t in enumerate(doc["trainers"]):
        s = chain.trainer_stats(honest_run.task_id, t["trainer"])
        accepted = sum(bin(b[i]).count("1") for b in bitmaps)
        credits = sum(n for b in bitmaps for f, n in enumerate(sizes) if b[i] >> f & 1)
        reward = sealed["claimable"] * credits // run.total_credits
        assert (t["index"], t["slashed"], t["stake"]) == (i, "0", str(s.stake))
        assert (t["accepted"], t["credits"], t["current_reward"]) == (accepted, str(credits), str(reward))
        assert (t["claimed"], t["claimed_reward"]) == (True, str(claims[i]))
        assert accepted == 4 and t["submitted"] == 4 and t["scored_out"] == 0  # 2 rounds x 2 fragments, all accepted
        assert credits == honest_run.credits[i] and claims[i] == reward == honest_run.rewards[i] > 0
    assert [r["weights_root"] for r in doc["rounds"]] == ["0x" + w.hex() for w in honest_run.weights_roots]
    assert [r["transcript_cid"] for r in doc["rounds"]] == honest_run.transcript_cids
    assert [r["accepted_count"] for r in doc["rounds"]] == [4, 4]
    assert [(r["heldout_loss"], r["heldout_loss_before"]) for r in doc["rounds"]] == [(0.875, 1.25), (0.5, None)]
    assert all(r["seconds"] is not None and r["seconds"] >= 0 for r in doc["rounds"])
    receipt = chain.get_receipt(honest_run.task_id)
    assert doc["receipt"]["run_root"] == "0x" + receipt.run_root.hex()
    assert doc["receipt"]["verifier_accepts"] is True
    assert doc["receipt"]["verifier"].lower() == "0x0000000000000000000000000000000000001008"
    assert doc["evidence"] == []
    names = {e["event"] for e in doc["events"]}
    assert {"TaskPosted", "RootFlowEnabled", "TrainerEnrolled", "RoundCommitted", "RootRunSealed",
            "RewardClaimed"} <= names
    assert not names & {"GradientSubmitted", "RoundFinalized"}  # submissions went off-chain, rounds by root

    page = _html(explorer, f"/runs/{tid}")
    assert 'http-equiv="refresh"' not in page  # sealed: nothing changes any more
    for w in honest_run.weights_roots:
        assert "0x" + w.hex() in page
    assert "accepts the receipt" in page and "0x" + receipt.run_root.hex() in page
    for t in doc["trainers"]:
        assert t["trainer"] in page and format_tokens(int(t["current_reward"])) in page
    assert "<polyline" in page and "0.87500" in page  # the held-out loss curve and table
    assert f"/runs/{tid}/rounds/1" in page

    rnd = _api(explorer, f"/api/runs/{tid}/rounds/1")
    assert rnd["transcript_error"] is None
    assert rnd["transcript"]["weights_root"] == "0x" + honest_run.weights_roots[1].hex()
    assert rnd["transcript_cid"] == honest_run.transcript_cids[1]
    page = _html(explorer, f"/runs/{tid}/rounds/1")
    assert honest_run.transcript_cids[1] in page and "Mean" in page
    by_name = _api(explorer, "/api/runs/replay-honest")  # the spec's name works as well as the hex id
    assert by_name["task_id"] == tid


@pytest.mark.slow
def test_slash_and_rejection_are_shown(stack, rejection_run, explorer):
    """Trainer 0's forced NaN payload was proven invalid on-chain (a slash); trainer 1's off-chain
    NaN payload was only left out. Both rejections are in the transcripts and on the pages."""
    tid = "0x" + rejection_run.task_id.hex()
    doc = _api(explorer, f"/api/runs/{tid}")
    slashed = [e for e in doc["evidence"] if e["event"] == "TrainerSlashed"]
    assert len(slashed) == 1 and slashed[0]["args"]["reason_name"] == "NON_FINITE"
    offender = slashed[0]["args"]["trainer"]
    assert offender.lower() == rejection_run.trainers[0]
    row = next(t for t in doc["trainers"] if t["trainer"] == offender)
    assert int(row["slashed"]) == int(slashed[0]["args"]["amount"]) > 0
    for t, (r, f) in zip(doc["trainers"], ((1, 0), (0, 1))):  # each trainer's one rejected payload
        assert t["submitted"] == 4 and t["accepted"] == 3 and t["scored_out"] == 1
        assert [(x["round"], x["fragment"], x["reason"]) for x in t["scored_out_reasons"]] == [(r, f, "NonFinite")]
    assert next(t for t in doc["trainers"] if t["trainer"] != offender)["slashed"] == "0"
    page = _html(explorer, f"/runs/{tid}")
    assert "TrainerSlashed" in page and "NON_FINITE" in page
    for r in (0, 1):
        assert "NonFinite" in _html(explorer, f"/runs/{tid}/rounds/{r}")


def test_hostile_spec_text_is_escaped(stack, dataset, explorer):
    sponsor = stack.chain(drv.SPONSOR)
    name = f"{HOSTILE}-{os.getpid()}-{time.time_ns()}"
    spec = build_spec(stack.ipfs, SpecDraft(task_id=name, sponsor_address=sponsor.address, fragment_count=2,
                                            trainer_count=2, quorum=2, inner_steps=1, max_rounds=1,
                                            reward_pool=10 * drv.TOKEN, min_stake=drv.TOKEN,
                                            metadata={"note": HOSTILE}), dataset)
    tid, _ = post_task(sponsor, stack.ipfs, spec)
    doc = _api(explorer, f"/api/runs/0x{tid.hex()}")
    assert doc["name"] == name and doc["spec"]["metadata"]["note"] == HOSTILE  # the JSON keeps the text as is
    assert doc["run"]["status"] == "ENROLLING" and doc["live"] is True
    for page in (_html(explorer, f"/runs/0x{tid.hex()}"), _html(explorer, "/?limit=200")):
        assert HOSTILE not in page and "<script" not in page
        assert "&lt;script&gt;alert(&#34;owned&#34;)&lt;/script&gt;" in page
    assert 'http-equiv="refresh" content="3"' in _html(explorer, f"/runs/0x{tid.hex()}")  # live: reloads itself


def test_unknown_and_malformed_ids(explorer):
    zero = "0x" + "00" * 32
    page = _html(explorer, f"/runs/{zero}", 404)
    assert f"no run with task id {zero}" in page
    assert _api(explorer, f"/api/runs/{zero}", 404)["error"].startswith("no run with task id")
    assert "64" in _html(explorer, "/runs/0x1234", 400)
    assert _api(explorer, "/api/runs/0x1234", 400)["status"] == 400
    assert "round" in _html(explorer, f"/runs/{zero}/rounds/x", 400)
    _html(explorer, "/no/such/page", 404)
    assert "limit" in _api(explorer, "/api/runs?limit=0", 400)["error"]


def _serve(rpc_url: str, deployments, ipfs_url: str):
    ipfs = IpfsClient(ipfs_url, timeout_s=5, retries=0)
    server = ExplorerServer(Explorer(ChainSource(rpc_url, deployments), ipfs, SpecCache(ipfs), SyncerRecords()),
                            port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.slow
def test_dead_services_are_clear_error_pages(stack, honest_run):
    tid = "0x" + honest_run.task_id.hex()
    dead = f"http://127.0.0.1:{free_port()}"
    server = _serve(stack.rpc_url, stack.deployments, dead)  # IPFS down: chain figures, a note, a 503 round
    try:
        page = _html(server.url, f"/runs/{tid}")
        assert "IPFS node" in page and dead in page and "accepts the receipt" in page
        assert "IPFS node" in _html(server.url, f"/runs/{tid}/rounds/0", 503)
        assert _api(server.url, "/api/runs")["ipfs_error"]
    finally:
        server.shutdown()
        server.server_close()
    server = _serve(dead, stack.deployments, stack.ipfs_url)  # RPC down: every chain page is a 503
    try:
        page = _html(server.url, "/", 503)
        assert "JSON-RPC endpoint is not answering at " + dead in page
        assert _api(server.url, f"/api/runs/{tid}", 503)["status"] == 503
    finally:
        server.shutdown()
        server.server_close()
