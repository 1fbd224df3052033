"""The main job end to end on a devnet: separate daemon processes, real contracts, real IPFS, real data.

Each test runs `tenzro_operator.demo.run_demo` at test scale (3 trainers, 3 rounds) and checks
the run's outcome against the chain and IPFS, not against the demo's own summary alone.
"""

import hashlib
import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from tenzro_operator.chain import ChainClient
from tenzro_operator.cli import cli
from tenzro_operator.demo import DemoSettings, post_demo_task, run_demo
from tenzro_operator.forecast_cli import export_model
from tenzro_operator.ipfs import IpfsClient
from tenzro_operator.task_runtime import WeightsError

pytestmark = pytest.mark.slow


def _settings(cfg, deployments, tmp_path, **kw) -> DemoSettings:
    base = dict(rpc=cfg.rpc_url, ipfs=cfg.ipfs_url, deployments=deployments, workdir=tmp_path / "work",
                out=tmp_path / "out", trainers=3, quorum=2, fragments=4, rounds=3, inner_steps=16, batch_size=32,
                grace_window_ms=90_000, timeout_s=600)
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
    # A watcher replayed every round as it landed and found nothing wrong in this honest run.
    w = summary["watcher"]
    assert w["rounds_checked"] == 3 and w["mismatches"] == 0
    assert [r["round"] for r in w["rounds"]] == [0, 1, 2] and all(r["payloads"] >= 2 * 4 for r in w["rounds"])
    # ... and the summary scores the sealed model zero-shot, on series no run trained on
    z = summary["zero_shot"]
    assert z["series"] >= 30 and z["windows"] >= z["series"] and 0 < z["relative_mase"] < 100

    # The bytes behind every accepted CID hash to what is on-chain.
    submitted = {(e["args"]["round"], e["args"]["fragment"], e["args"]["trainer"].lower()): e["args"]
                 for e in _events(chain, summary, "GradientSubmitted")}
    trainers = [a.lower() for a in chain.trainers_of(task_id)]
    checked = 0
    for fin in _events(chain, summary, "RoundFinalized"):
        commit = fin["args"]["commit"]
        for idx, bitmap in enumerate(commit["acceptedBitmaps"]):
            for f in range(len(commit["fragmentHashes"])):
                if bitmap >> f & 1:
                    sub = submitted[(fin["args"]["round"], f, trainers[idx])]
                    data = ipfs.cat(sub["cid"])
                    assert hashlib.sha256(data).digest() == bytes(sub["payloadHash"])
                    checked += 1
    assert checked >= 3 * 2 * 4  # 3 rounds x K=2 x 4 fragments at least

    # Rewards + refunds (+ dust to the sponsor) + the syncer's fees + what slashes burned add up
    # exactly to the pool and the stakes escrowed; the syncer claimed its fee after the seal.
    run = chain.get_run(task_id)
    stakes = sum(chain.trainer_stats(task_id, t).stake for t in chain.trainers_of(task_id))
    slashed = sum(chain.trainer_stats(task_id, t).slashed for t in chain.trainers_of(task_id))
    payouts = _events(chain, summary, "PayoutCredited")
    rewards = sum(p["args"]["reward"] for p in payouts)
    refunds = sum(p["args"]["stakeRefund"] for p in payouts)
    fee_per_round = run.reward_pool * 100 // 10_000 // 3  # the demo's 1 % over 3 rounds
    assert run.syncer_fees_accrued == 3 * fee_per_round
    assert rewards == run.reward_pool - run.syncer_fees_accrued
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


def test_trainer_killed_mid_run_is_counted_missed_and_run_seals(deployed, tmp_path):
    cfg, deployments = deployed

    def kill_trainer_2(round_index, procs):
        # at the first round >= 1 the demo's 1 s poll sees (on a loaded machine it may not see round 1)
        victim = next(p for p in procs if p.name == "trainer-2")
        if round_index >= 1 and not victim.killed:
            victim.kill()

    # A miss counts only when a round is finalized after its deadline (an early finalization on
    # quorum never counts one, PROTOCOL.md §4): this syncer waits for every deadline.
    settings = _settings(cfg, deployments, tmp_path, grace_window_ms=20_000, max_missed_rounds=1)
    settings.syncer_options = {"finalize_early": False}
    summary = run_demo(settings, on_round=kill_trainer_2)
    rows = {r["trainer"]: r for r in summary["trainers"]}
    assert rows["trainer-2"]["missed_rounds"] >= 1
    assert rows["trainer-0"]["missed_rounds"] == 0 and rows["trainer-1"]["missed_rounds"] == 0
    assert rows["trainer-2"]["accepted"] < rows["trainer-0"]["accepted"]
    assert summary["receipt"]["verifier_ok"] and summary["receipt"]["replay_ok"]
    assert summary["accounting"]["conserved"] is True  # an eviction's slash is burned, and counted


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


def test_export_model_and_forecast_on_the_sealed_run(sealed, tmp_path):
    """`tenzro train export-model` and `tenzro forecast --task-id` against the sealed devnet run:
    the exported weights are the receipt's, the forecast is long format with the asked quantiles,
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
    assert list(fc.columns) == ["unique_id", "ds", "yhat", "q-0.1", "q-0.5", "q-0.9"] and len(fc) == 24
    assert fc["ds"].iloc[0] == pd.Timestamp("2025-01-01") + pd.Timedelta(hours=300)
    assert (fc["q-0.1"] <= fc["q-0.9"]).all() and fc["yhat"].between(20, 80).all()
    # the same forecast from the exported directory: --task-id fetched the same, checked weights
    res = runner.invoke(cli, ["forecast", "--model", str(out), "--input", str(csv), "--h", "24",
                              "--quantiles", "0.1,0.5,0.9", *conn])
    assert res.exit_code == 0 and res.output.strip().splitlines()[1:] == fc_path.read_text().strip().splitlines()[1:]

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
    final_cids = {cid for e in _events(chain, summary, "RoundFinalized") for cid in e["args"]["commit"]["fragmentCids"]}
    with pytest.raises(WeightsError, match="do not match the receipt's final model hash"):
        export_model(chain, _CorruptingIpfs(cfg.ipfs_url, final_cids), task_id, tmp_path / "m3")
    assert not (tmp_path / "m3" / "model.safetensors").exists()
