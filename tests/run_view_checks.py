"""Checks that every read-only view of a sealed root-flow run tells what the chain's own events and
claims say (issue #27 item 1): ``tenzro train get-run --format json``, ``trainer-stats --format
json``, ``reward``, the explorer's JSON API for the run and for each round (a real `ExplorerServer` on
a free port, over HTTP), its run page as a real headless Chromium shows it (tests/browser_page.py)
and the gateway's ``tenzro_training_getRun``.

The expected figures are computed here from the raw events (``RoundCommitted``, ``RootRunSealed``,
``RewardClaimed``), the registry's getters (``getRound``, ``rootState``, ``trainerMetrics``) and the
transcripts on IPFS, independently of `tenzro_operator.views.run`: credits as ``commitRound`` sums
them (endorsed and unendorsed, checked against the registry's credits root), rewards as ``claim``
pays them.

Used by the tests that already seal a root-flow run (tests/roles/test_root_flow_daemons.py,
tests/e2e/test_end_to_end.py)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import httpx
from click.testing import CliRunner

__all__ = ["assert_views_tell_the_truth"]


def _events(chain, tid: bytes, name: str) -> list[dict]:
    return chain.get_logs(chain.deployment.deploy_block, chain.block_number(), [name], task_id=tid)


def _expected(chain, ipfs, tid: bytes) -> dict:
    """The figures, from the chain's events and getters and the transcripts alone."""
    from tenzro_operator.transcript import MAX_TRANSCRIPT_BYTES, RoundTranscript
    from tenzro_trainer import round_commitment as rc

    run = chain.get_run(tid)
    trainers = chain.trainers_of(tid)
    commits: dict[int, dict] = {}
    for e in _events(chain, tid, "RoundCommitted"):  # a round committed again after a rewind: the last
        commits[int(e["args"]["round"])] = {**e["args"], "tx": e["tx_hash"]}
    assert sorted(commits) == list(range(run.max_rounds))
    n = len(trainers)
    words, accepted, submitted, scored_out = [0] * n, [0] * n, [0] * n, [0] * n
    rounds = {}
    size = lambda bits: sum(x for f, x in enumerate(run.fragment_sizes) if bits >> f & 1)  # noqa: E731
    for r, a in commits.items():
        bitmaps = [int(b) for b in a["acceptedBitmaps"]]
        unendorsed = [int(u) for u in a["unendorsedBitmaps"]] or [0] * n
        for i, (b, u) in enumerate(zip(bitmaps, unendorsed)):
            accepted[i] += bin(b).count("1")
            words[i] += size(b & ~u) + (size(u) << 128)  # endorsed low, unendorsed high (PROTOCOL.md §5)
        rec = chain.get_round(tid, r)
        tr = RoundTranscript.parse(ipfs.cat(a["transcriptCid"], max_bytes=MAX_TRANSCRIPT_BYTES),
                                   bytes(a["transcriptHash"]))
        lower = [t.lower() for t in trainers]
        for fr in tr.fragments:
            for s in fr.accepted:
                submitted[lower.index(s.trainer.lower())] += 1
            for s in fr.rejected:
                submitted[lower.index(s.trainer.lower())] += 1
                scored_out[lower.index(s.trainer.lower())] += 1
        rounds[r] = {"round": r, "accepted_bitmaps": bitmaps, "accepted_count": int(rec.accepted_count),
                     "weights_root": "0x" + bytes(a["weightsRoot"]).hex(), "transcript_cid": a["transcriptCid"],
                     "transcript_hash": "0x" + bytes(a["transcriptHash"]).hex(), "tx": a["tx"],
                     "committed_at": rec.finalized_at,
                     "challenge_window_ends_at": rec.finalized_at + run.challenge_seconds,
                     "fragment_cids": [f.weights.cid for f in tr.fragments]}
    # the credits are the registry's: their words give its credits root
    credits = [(w & (2**128 - 1)) + (w >> 128) for w in words]
    paid = [(w & (2**128 - 1)) + min(w >> 128, w & (2**128 - 1)) for w in words]  # claim's e + min(u, e)
    assert rc.credits_tree(words).root == chain.root_state(tid)[2] and sum(credits) == run.total_credits
    sealed = _events(chain, tid, "RootRunSealed")[-1]["args"]
    claims = {int(e["args"]["index"]): int(e["args"]["reward"]) for e in _events(chain, tid, "RewardClaimed")}
    total = sum(credits)
    rows = {}
    for i, t in enumerate(trainers):
        st = chain.trainer_stats(tid, t)
        assert st.index == i
        rows[t.lower()] = {"trainer": t, "index": i, "accepted": accepted[i], "credits": str(credits[i]),
                           "current_reward": str(int(sealed["claimable"]) * paid[i] // total if total else 0),
                           "claimed_reward": str(claims.get(i, 0)), "claimed": i in claims,
                           "submitted": submitted[i], "scored_out": scored_out[i], "slashed": str(st.slashed),
                           "stake": str(st.stake), "did": st.did}
    return {"run": run, "rounds": rounds, "trainers": rows, "claimable": str(int(sealed["claimable"])),
            "claim_deadline": int(sealed["claimDeadline"]), "claimed_total": str(sum(claims.values())),
            "total_credits": str(total)}


def _trainer_fields(row: dict, keys) -> dict:
    return {k: row[k] for k in keys}


def _assert_page_in_chromium(url: str, want: dict) -> None:
    """The run page as a person sees it in a real headless Chromium: the rounds' accepted counts and
    weights roots, each trainer's submissions, acceptances, credits, reward and slashing."""
    from browser_page import read_sealed_page
    from tenzro_operator.units import format_tokens

    snap = read_sealed_page(url)
    assert snap["status"] == "SEALED", snap
    assert [(r["round"], r["accepted"], r["weights_root"], r["finalized"]) for r in snap["rounds"]] == \
        [(w["round"], w["accepted_count"], w["weights_root"], True) for _, w in sorted(want["rounds"].items())]
    shown = {t["trainer"].lower(): t for t in snap["trainers"]}
    assert set(shown) == set(want["trainers"])
    for a, w in want["trainers"].items():
        t = shown[a]
        assert (t["index"], t["submitted"], t["accepted"], t["credits"], t["reward"], t["slashed"]) == \
            (w["index"], w["submitted"], w["accepted"], w["credits"], format_tokens(int(w["current_reward"])),
             format_tokens(int(w["slashed"]))), (a, t)


def assert_views_tell_the_truth(chain, ipfs, rpc_url: str, ipfs_url: str, deployments: Path, tid: bytes) -> dict:
    """Assert that get-run, trainer-stats, the explorer's API and the gateway's getRun show the
    sealed root-flow run ``tid`` as its events and claims say. Returns the expected figures."""
    from tenzro_operator.cli.main import cli
    from tenzro_operator.explorer.server import Explorer, ExplorerServer
    from tenzro_operator.explorer.sources import ChainSource, SpecCache, SyncerRecords
    from tenzro_operator.gateway.methods import TrainingMethods
    from tenzro_operator.gateway.relay import Relay

    want = _expected(chain, ipfs, tid)
    run = want["run"]
    assert run.status.name == "SEALED"
    hexid = "0x" + tid.hex()
    keys = ("trainer", "index", "accepted", "credits", "current_reward", "claimed_reward", "claimed", "submitted",
            "scored_out", "slashed", "stake", "did")
    common = ["--rpc", rpc_url, "--deployments", str(deployments), "--ipfs", ipfs_url, "--format", "json"]

    def cli_json(*args) -> dict:
        res = CliRunner().invoke(cli, ["train", *args, *common], catch_exceptions=False)
        assert res.exit_code == 0, res.output
        return json.loads(res.output)

    # get-run --format json
    doc = cli_json("get-run", "--task-id", hexid)
    assert (doc["phase"], doc["status"]) == ("SEALED", "SEALED") and "flow" not in doc
    assert doc["next_change_at"] == want["claim_deadline"] + 1 and doc["claim_deadline"] == want["claim_deadline"]
    assert (doc["claimable_pool"], doc["claimed_total"], doc["total_credits"]) == \
        (want["claimable"], want["claimed_total"], want["total_credits"])
    assert doc["transcript_errors"] == []
    got = {t["trainer"].lower(): _trainer_fields(t, keys) for t in doc["trainers"]}
    assert got == {a: _trainer_fields(w, keys) for a, w in want["trainers"].items()}
    assert any(int(t["credits"]) > 0 for t in doc["trainers"])  # not the all-zero view of issue #27
    rkeys = ("round", "accepted_bitmaps", "accepted_count", "weights_root", "transcript_cid", "transcript_hash",
             "tx", "committed_at", "challenge_window_ends_at")
    assert [{k: r[k] for k in rkeys} for r in doc["rounds"]] == \
        [{k: w[k] for k in rkeys} for _, w in sorted(want["rounds"].items())]
    assert all(r["status"] == "committed" and r["finalized"] for r in doc["rounds"])

    # the table for people: the phase, the rounds' transcripts and the trainers' credits
    conn = ["--rpc", rpc_url, "--deployments", str(deployments), "--ipfs", ipfs_url]
    table = CliRunner().invoke(cli, ["train", "get-run", "--task-id", hexid, "--atto", *conn], env={"COLUMNS": "400"})
    assert table.exit_code == 0, table.output
    assert "claims close" in table.output and "root" in table.output
    for w in want["rounds"].values():
        assert w["transcript_cid"] in table.output
    for w in want["trainers"].values():
        assert w["trainer"] in table.output and f"{w['current_reward']} atto" in table.output

    # trainer-stats --format json, per trainer
    for a, w in want["trainers"].items():
        st = cli_json("trainer-stats", "--task-id", hexid, "--trainer", w["trainer"])
        assert _trainer_fields(st, keys) == _trainer_fields(w, keys), a

    # reward: each trainer's reward recomputed from the chain alone is what its claim paid
    for w in want["trainers"].values():
        rw = cli_json("reward", "--task-id", hexid, "--trainer", w["trainer"])
        assert (rw["credits"], rw["reward"], rw["pool"], rw["sealed"]) == \
            (w["credits"], w["current_reward"], want["claimable"], True)
        assert sum(int(x["credits"]) for x in rw["rounds"]) == int(w["credits"])
        if w["claimed"]:
            assert rw["reward"] == w["claimed_reward"]
    # a second claim, or a second seal, is one line and sends nothing (the daemons did both)
    claimed = next(w for w in want["trainers"].values() if w["claimed"])
    res = CliRunner().invoke(cli, ["train", "claim", "--task-id", hexid, "--trainer", claimed["trainer"],
                                   "--keystore", "/nonexistent.json", *conn])
    assert res.exit_code == 1 and "has claimed already" in res.output, res.output

    # the gateway's getRun: the same document, less what only the transcripts know
    gw = TrainingMethods(chain, Relay(chain)).getRun(hexid)
    for t in gw["trainers"]:
        w = want["trainers"][t["trainer"].lower()]
        assert (t["accepted"], t["credits"], t["current_reward"], t["claimed_reward"]) == \
            (w["accepted"], w["credits"], w["current_reward"], w["claimed_reward"])
    assert [r["weights_root"] for r in gw["rounds"]] == [w["weights_root"] for _, w in sorted(want["rounds"].items())]

    # the explorer's JSON API over HTTP: the run and every round (a committed round is no 404)
    server = ExplorerServer(Explorer(ChainSource(rpc_url, deployments), ipfs, SpecCache(ipfs), SyncerRecords()),
                            port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        r = httpx.get(f"{base}/api/runs/{hexid}", timeout=60)
        assert r.status_code == 200, r.text[:500]
        page = r.json()
        assert (page["phase"], page["next_change_at"]) == ("SEALED", want["claim_deadline"] + 1)
        got = {t["trainer"].lower(): _trainer_fields(t, keys) for t in page["trainers"]}
        assert got == {a: _trainer_fields(w, keys) for a, w in want["trainers"].items()}
        assert [{k: x[k] for k in rkeys} for x in page["rounds"]] == \
            [{k: w[k] for k in rkeys} for _, w in sorted(want["rounds"].items())]
        assert page["receipt"]["verifier_accepts"] is True
        for rnd, w in want["rounds"].items():
            r = httpx.get(f"{base}/api/runs/{hexid}/rounds/{rnd}", timeout=60)
            assert r.status_code == 200, r.text[:500]
            one = r.json()
            assert one["transcript_error"] is None and one["transcript"]["weights_root"] == w["weights_root"]
            assert {k: one[k] for k in rkeys} == {k: w[k] for k in rkeys}
            assert one["fragment_cids"] == w["fragment_cids"]
            html = httpx.get(f"{base}/runs/{hexid}/rounds/{rnd}", timeout=60)
            assert html.status_code == 200 and w["transcript_cid"] in html.text
        html = httpx.get(f"{base}/runs/{hexid}", timeout=60)
        assert html.status_code == 200 and "Traceback" not in html.text and "claims close" in html.text
        _assert_page_in_chromium(f"{base}/runs/{hexid}", want)
    finally:
        server.shutdown()
        server.server_close()
    return want
