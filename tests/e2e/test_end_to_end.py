"""The main job end to end on a devnet: separate daemon processes, real contracts, real IPFS, real data.

Each test runs `tenzro_operator.demo.run_demo` at test scale (3 trainers, 3 rounds) and checks
the run's outcome against the chain and IPFS, not against the demo's own summary alone. Runs
are settled by root (contracts/PROTOCOL.md §5) with the robust defaults of a new spec.
"""

import hashlib
import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from tenzro_operator.chain import ChainClient
from tenzro_operator.cli.forecast import export_model
from tenzro_operator.cli.main import cli
from tenzro_operator.demo import DemoSettings, post_demo_task, run_demo
from tenzro_operator.ipfs import IpfsClient
from tenzro_operator.root_flow import RevealMessage, committed_rounds, committed_weights, cumulative_credits
from tenzro_operator.task_runtime import WeightsError
from tenzro_operator.transcript import MAX_TRANSCRIPT_BYTES, RoundTranscript
from tenzro_trainer.config import ROBUST_DEFAULTS

pytestmark = pytest.mark.slow


def _settings(cfg, deployments, tmp_path, **kw) -> DemoSettings:
    base = dict(rpc=cfg.rpc_url, ipfs=cfg.ipfs_url, deployments=deployments, workdir=tmp_path / "work",
                out=tmp_path / "out", trainers=3, quorum=2, fragments=4, rounds=3, inner_steps=16, batch_size=32,
                grace_window_ms=30_000, challenge_window_ms=15_000, timeout_s=600)
    return DemoSettings(**{**base, **kw})


def _events(chain: ChainClient, summary: dict, name: str) -> list[dict]:
    return chain.get_logs(summary["posted_block"], chain.block_number(), [name],
                          task_id=bytes.fromhex(summary["task_id"][2:]))


@pytest.fixture(scope="module")
def sealed(deployed, tmp_path_factory):
    """(cfg, deployments, summary) of one demo run at test scale, sealed."""
    cfg, deployments = deployed
    return cfg, deployments, run_demo(_settings(cfg, deployments, tmp_path_factory.mktemp("demo")))


def test_full_run_seals_verifies_and_conserves_tokens(sealed):
    cfg, deployments, summary = sealed
    chain, ipfs = ChainClient(cfg.rpc_url, deployments), IpfsClient(cfg.ipfs_url)
    task_id = bytes.fromhex(summary["task_id"][2:])

    # Held-out loss of the global weights goes down over the run.
    curve = [r["heldout_loss"] for r in summary["heldout"]]
    assert len(curve) == 4 and curve[-1] < curve[0], curve
    # The run was posted in the root flow with the robust defaults of a new spec.
    run = chain.get_run(task_id)
    assert chain.is_root_flow(task_id)
    assert summary["aggregation"] == ROBUST_DEFAULTS["rule"] and summary["aggregation_params"] == ROBUST_DEFAULTS["rule_params"]
    assert summary["score_min"] == 0.0 and ROBUST_DEFAULTS["scoring"]
    # A watcher replayed every round as it landed and found nothing wrong in this honest run.
    w = summary["watcher"]
    assert w["rounds_checked"] == 3 and w["mismatches"] == 0
    assert [r["round"] for r in w["rounds"]] == [0, 1, 2] and all(r["ok"] for r in w["rounds"])
    # ... and the summary scores the sealed model zero-shot, on series no run trained on
    z = summary["zero_shot"]
    assert z["series"] >= 30 and z["windows"] >= z["series"] and 0 < z["relative_mase"] < 100

    # Every round's transcript hashes to what RoundCommitted holds; its accepted submissions are
    # exactly the committed bitmaps' bits, each signed by its trainer, and the bytes behind every
    # accepted CID hash to the signed payload hash.
    trainers = [a.lower() for a in chain.trainers_of(task_id)]
    rounds = committed_rounds(chain, task_id, summary["posted_block"], run.max_rounds)
    assert sorted(rounds) == [0, 1, 2]
    checked, rejected = 0, {t: 0 for t in trainers}
    for r, ev in rounds.items():
        tr = RoundTranscript.parse(ipfs.cat(ev["transcriptCid"], max_bytes=MAX_TRANSCRIPT_BYTES),
                                   bytes(ev["transcriptHash"]))
        bits = set()
        for rec in tr.fragments:
            for sub in rec.accepted:
                idx = trainers.index(sub.trainer)
                bits.add((idx, rec.fragment))
                msg = RevealMessage(task=summary["task_id"], round=r, fragment=rec.fragment, trainer=sub.trainer,
                                    base_root=sub.base_root, payload_root=sub.payload_root,
                                    payload_sumsq=sub.payload_sumsq, cid=sub.cid, payload_hash=sub.sha256,
                                    signature=sub.signature)
                assert msg.signer(chain.chain_id, chain.registry.address) == sub.trainer
                assert "0x" + hashlib.sha256(ipfs.cat(sub.cid)).hexdigest() == sub.sha256
                checked += 1
        assert bits == {(i, f) for i, b in enumerate(ev["acceptedBitmaps"]) for f in range(4) if int(b) >> f & 1}
        for rec in tr.fragments:
            for sub in rec.rejected:
                rejected[sub.trainer.lower()] += 1
    assert checked >= 3 * 2 * 4  # 3 rounds x K=2 x 4 fragments at least
    rows = {r["trainer"]: r for r in summary["trainers"]}
    assert sum(r["accepted"] for r in rows.values()) == checked
    # the summary's "scored out" column: each trainer's submissions the transcripts left out
    assert {r["address"].lower(): r["scored_out"] for r in rows.values()} == rejected

    # Rewards (claimed with credit proofs) + the floor dust left to the sponsor + refunds + the
    # syncer's fees + what slashes burned add up exactly to the pool and the stakes escrowed;
    # every trainer with credits claimed floor(claimable x credits / total); the syncer claimed its
    # fee after the seal.
    stakes = sum(chain.trainer_stats(task_id, t).stake for t in chain.trainers_of(task_id))
    slashed = sum(chain.trainer_stats(task_id, t).slashed for t in chain.trainers_of(task_id))
    payouts = _events(chain, summary, "PayoutCredited")
    refunds = sum(p["args"]["stakeRefund"] for p in payouts)
    fee_per_round = run.reward_pool * 100 // 10_000 // 3  # the demo's 1 % over 3 rounds
    assert run.syncer_fees_accrued == 3 * fee_per_round
    [sealed_ev] = _events(chain, summary, "RootRunSealed")
    claimable = sealed_ev["args"]["claimable"]
    assert claimable == run.reward_pool - run.syncer_fees_accrued
    credits = cumulative_credits(rounds, run.fragment_sizes, len(trainers))
    claims = {e["args"]["trainer"].lower(): e["args"]["reward"] for e in _events(chain, summary, "RewardClaimed")}
    assert claims == {t: claimable * c // sum(credits) for t, c in zip(trainers, credits) if c}
    assert 0 <= claimable - sum(claims.values()) < len(trainers)  # the floor dust, swept to the sponsor later
    assert {r["address"].lower(): r["reward_tnzo"] for r in rows.values()} == pytest.approx(
        {t: claims.get(t, 0) / 10**18 for t in trainers})
    assert int(summary["accounting"]["dust"]) == claimable - sum(claims.values())
    assert refunds == stakes - slashed
    assert sum(e["args"]["amount"] for e in _events(chain, summary, "StakeBurned")) == slashed
    claimed = _events(chain, summary, "SyncerFeeClaimed")
    assert [e["args"]["amount"] for e in claimed] == [run.syncer_fees_accrued]
    assert chain.syncer_fee_of(task_id, run.syncer) == 0
    # the demo's own accounting (read from the chain) balances to the atto-unit
    acct = summary["accounting"]
    assert acct["conserved"] is True and acct["in"] == acct["out"]
    assert int(acct["syncer_fees"]) == run.syncer_fees_accrued and int(acct["pool"]) == run.reward_pool

    # The receipt verifies on-chain (0x...1008) and by replay from IPFS.
    assert summary["receipt"]["verifier_ok"] and summary["receipt"]["replay_ok"]
    receipt = chain.get_receipt(task_id)
    assert chain.verify_receipt(receipt.serialized, receipt.run_root)
    assert not chain.verify_receipt(receipt.serialized, bytes(32))
    assert summary["escrow_released_tnzo"] == 50


def test_trainer_killed_mid_run_earns_nothing_for_its_missed_rounds_and_run_seals(deployed, tmp_path):
    cfg, deployments = deployed

    def kill_trainer_2(round_index, procs):
        # at the first round >= 1 the demo's 1 s poll sees (on a loaded machine it may not see round 1)
        victim = next(p for p in procs if p.name == "trainer-2")
        if round_index >= 1 and not victim.killed:
            victim.kill()

    # The registry counts no misses and evicts nobody: a trainer that stops delivering is simply in
    # no later commit, so it earns no credit (and no share of the pool) for those rounds.
    summary = run_demo(_settings(cfg, deployments, tmp_path), on_round=kill_trainer_2)
    rows = {r["trainer"]: r for r in summary["trainers"]}
    assert rows["trainer-2"]["accepted"] < rows["trainer-0"]["accepted"]
    assert rows["trainer-2"]["credits"] < rows["trainer-0"]["credits"]
    assert rows["trainer-2"]["reward_tnzo"] < rows["trainer-0"]["reward_tnzo"]
    assert summary["receipt"]["verifier_ok"] and summary["receipt"]["replay_ok"]
    assert summary["accounting"]["conserved"] is True


class _CorruptingIpfs(IpfsClient):
    """A node that serves the files `targets` names with one bit flipped (a hostile or broken gateway)."""

    def __init__(self, url: str, targets: set[str]):
        super().__init__(url)
        self.targets = targets

    def cat(self, cid, *args, **kw):
        data = super().cat(cid, *args, **kw)
        if cid not in self.targets:
            return data
        flipped = bytearray(data)
        flipped[len(flipped) // 2] ^= 1
        return bytes(flipped)


def test_every_view_shows_the_sealed_root_flow_run_as_the_chain_says(sealed):
    """Issue #27 item 1: after the demo's sealed root-flow run, get-run, trainer-stats, the
    explorer's JSON API (run and rounds) and the gateway's getRun show every trainer's credits,
    accepted fragments and rewards, and every round's bitmaps, weights root and transcript, as the
    chain's events and claims say (`run_view_checks`)."""
    from run_view_checks import assert_views_tell_the_truth

    cfg, deployments, summary = sealed
    chain, ipfs = ChainClient(cfg.rpc_url, deployments), IpfsClient(cfg.ipfs_url)
    task_id = bytes.fromhex(summary["task_id"][2:])
    want = assert_views_tell_the_truth(chain, ipfs, cfg.rpc_url, cfg.ipfs_url, deployments, task_id)
    assert len(want["rounds"]) == 3 and int(want["claimed_total"]) > 0


def test_export_model_and_forecast_on_the_sealed_run(sealed, tmp_path):
    """`tenzro train export-model` and `tenzro forecast --task-id` against the sealed devnet run:
    the exported weights are the receipt's, the forecast is long format (the demo's point head: yhat only),
    and a missing run, an unsealed run and weights that do not match the receipt are one-line errors."""
    cfg, deployments, summary = sealed
    conn = ["--rpc", cfg.rpc_url, "--ipfs", cfg.ipfs_url, "--deployments", str(deployments)]
    runner = CliRunner()
    chain = ChainClient(cfg.rpc_url, deployments)
    task_id = bytes.fromhex(summary["task_id"][2:])

    out = tmp_path / "model"
    res = runner.invoke(cli, ["train", "export-model", "--task-id", summary["task_id"], "--out", str(out),
                              "--format", "json", *conn])
    assert res.exit_code == 0, res.output
    meta = json.loads(res.output)
    assert meta["provenance"]["final_model_hash"] == "0x" + bytes(chain.get_receipt(task_id).final_model_hash).hex()
    assert (out / "model.safetensors").stat().st_size > 1000
    # the average of the last rounds' weights, from the command line; more rounds than the run has: one line
    res = runner.invoke(cli, ["train", "export-model", "--task-id", summary["task_id"], "--out", str(tmp_path / "avg"),
                              "--average-last", "2", "--average-stride", "2", *conn])
    assert res.exit_code == 0 and "the average of rounds [2, 0]" in res.output, res.output
    res = runner.invoke(cli, ["train", "export-model", "--task-id", summary["task_id"], "--out", str(tmp_path / "avg4"),
                              "--average-last", "4", *conn])
    assert res.exit_code == 1 and "cannot average the last 4 rounds 1 apart" in res.output
    assert "Traceback" not in res.output

    t = np.arange(300)
    hist = pd.DataFrame({"unique_id": "load", "ds": pd.date_range("2025-01-01", periods=300, freq="h"),
                         "y": 50 + 10 * np.sin(2 * np.pi * t / 24)})
    csv = tmp_path / "history.csv"
    hist.to_csv(csv, index=False)
    fc_path = tmp_path / "fc.csv"
    res = runner.invoke(cli, ["forecast", "--task-id", summary["task_id"], "--input", str(csv), "--h", "24",
                              "--quantiles", "0.1,0.5,0.9", "--output", str(fc_path), *conn])
    assert res.exit_code == 0, res.output
    fc = pd.read_csv(fc_path, parse_dates=["ds"])
    # the demo's model has a point head: its "quantiles" would all be the median, so only yhat, said so
    assert "point head" in res.output
    assert list(fc.columns) == ["unique_id", "ds", "yhat"] and len(fc) == 24
    assert fc["ds"].iloc[0] == pd.Timestamp("2025-01-01") + pd.Timedelta(hours=300)
    assert fc["yhat"].between(20, 80).all()
    # the same forecast from the exported directory: --task-id fetched the same, checked weights
    res = CliRunner(mix_stderr=False).invoke(cli, ["forecast", "--model", str(out), "--input", str(csv), "--h", "24",
                                                   "--quantiles", "0.1,0.5,0.9", *conn])
    assert res.exit_code == 0 and res.stdout.strip().splitlines() == fc_path.read_text().strip().splitlines()
    assert "point head" in res.stderr  # the note goes to stderr: stdout stays the CSV

    # errors: unknown run, a run that is not sealed, too short a history, weights not the receipt's
    res = runner.invoke(cli, ["forecast", "--task-id", "0x" + "ab" * 32, "--input", str(csv), "--h", "4", *conn])
    assert res.exit_code == 1 and "no run with task id" in res.output and "Traceback" not in res.output
    posted = post_demo_task(_settings(cfg, deployments, tmp_path / "unsealed"))
    res = runner.invoke(cli, ["train", "export-model", "--task-id", "0x" + posted.task_id.hex(),
                              "--out", str(tmp_path / "m2"), *conn])
    assert res.exit_code == 1 and "not SEALED" in res.output and "Traceback" not in res.output
    short = tmp_path / "short.csv"
    hist.head(4).to_csv(short, index=False)
    res = runner.invoke(cli, ["forecast", "--task-id", summary["task_id"], "--input", str(short), "--h", "4", *conn])
    assert res.exit_code == 1 and "observed points" in res.output
    last = committed_rounds(chain, task_id, summary["posted_block"], 3)[2]
    final_cids = set(committed_weights(IpfsClient(cfg.ipfs_url), last)[0])
    with pytest.raises(WeightsError, match="do not match the receipt's final model hash"):
        export_model(chain, _CorruptingIpfs(cfg.ipfs_url, final_cids), task_id, tmp_path / "m3")
    assert not (tmp_path / "m3" / "model.safetensors").exists()
