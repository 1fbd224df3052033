"""The seven methods against the real devnet: a run posted, enrolled, its forced submissions
revealed, two rounds committed and the run sealed through the gateway (users sign, the gateway
relays), reads equal to the CLI's
JSON, and the refusals: unknown task, forged or misdirected transactions, bad signatures,
reverts decoded by name (before broadcasting, and once mined)."""

from __future__ import annotations

import hashlib
import json

import pytest

from gw_stack import (
    BAD_SIGNATURE,
    NO_RELAYER,
    REVERTED,
    TX_REJECTED,
    Rpc,
    commit_for,
    commit_round_tx,
    enroll_tx,
    fresh_spec,
    post_task_tx,
    signed_tx,
    submission,
    use_root_flow_tx,
)
from stack import MIN_SYNCER_STAKE, TOKEN, ensure_syncer_stake, past_commit_phase

STAKE = 100 * TOKEN
UNKNOWN = "0x" + "ab" * 32


def _nonce(client) -> int:
    return client.w3.eth.get_transaction_count(client.address)


@pytest.fixture
def posted(rpc, roles):
    """A run posted through the gateway (postTaskWithPermit, then useRootFlow, signed by the
    sponsor): (spec, tid)."""
    spec = fresh_spec()
    res = rpc.result("postTask", {"raw_transaction": post_task_tx(roles["sponsor"], spec)})
    assert res["status"] == "success" and res["function"] == "postTaskWithPermit"
    assert res["from"] == roles["sponsor"].address
    assert res["task_id"] == "0x" + spec.task_id_bytes.hex()
    assert res["event"]["sponsor"] == roles["sponsor"].address
    root = rpc.result("postTask", {"raw_transaction": use_root_flow_tx(roles["sponsor"], spec)})
    assert root["function"] == "useRootFlow" and root["task_id"] == res["task_id"]
    assert roles["base"].is_root_flow(spec.task_id_bytes)
    return spec, spec.task_id_bytes


@pytest.fixture
def training(rpc, roles, posted):
    """``posted`` with t0 (by permit) and t1 (plain enrollTrainer after an approve) enrolled through
    the gateway and a syncer elected: round 0 is open."""
    spec, tid = posted
    first = rpc.result("enrollTrainer", {"raw_transaction": enroll_tx(roles["t0"], tid, STAKE)})
    assert first["function"] == "enrollTrainerWithPermit" and first["event"]["index"] == 0
    assert first["event"]["stake"] == str(STAKE)  # above 2**53: a decimal string
    second = rpc.result("enrollTrainer", {"raw_transaction": enroll_tx(roles["t1"], tid, STAKE, permit=False)})
    assert second["function"] == "enrollTrainer" and second["event"]["trainer"] == roles["t1"].address
    syncer = roles["syncer"]
    ensure_syncer_stake(syncer, spec.syncer_bond_atto, MIN_SYNCER_STAKE)
    assert syncer.run_syncer_election(tid) == syncer.address
    return spec, tid


def test_reads_equal_the_cli_json(rpc, roles, training, chain):
    from click.testing import CliRunner

    from tenzro_operator.cli.main import cli

    spec, tid = training
    common = ["--rpc", chain.rpc_url, "--deployments", str(chain.deployments), "--format", "json"]

    def cli_json(*args):
        res = CliRunner().invoke(cli, ["train", *args, *common], catch_exceptions=False)
        assert res.exit_code == 0, res.output
        return json.loads(res.output)

    def without_transcripts(run: dict) -> dict:  # what only the CLI reads, from the transcripts on IPFS
        return {**run, "trainers": [{k: v for k, v in t.items() if k not in ("submitted", "scored_out")}
                                    for t in run["trainers"]]}

    got = rpc.result("getRun", {"task_id": spec.task_id})  # by the spec's name, as --task-id
    cli_run = cli_json("get-run", "--task-id", spec.task_id)
    assert without_transcripts(got) == without_transcripts(cli_run)
    assert {t["submitted"] for t in got["trainers"]} == {None}  # the gateway reads no transcripts
    assert got["status"] == "TRAINING" and [t["trainer"] for t in got["trainers"]] == [roles["t0"].address,
                                                                                         roles["t1"].address]
    assert "trainers" not in rpc.result("getRun", {"task_id": "0x" + tid.hex(), "trainers": False})
    total = roles["base"].list_runs(0, 1)[1]
    page = rpc.result("listRuns", {"offset": total - 1, "limit": 5})
    assert page == cli_json("list-runs", "--offset", str(total - 1), "--limit", "5")
    assert page["runs"][-1]["task_id"] == "0x" + tid.hex()


def test_unknown_task_and_unsealed_receipt(rpc, training):
    for method in ("getRun", "getReceipt"):
        err = rpc.error(method, {"task_id": UNKNOWN}, REVERTED)
        assert err["data"]["error"] == "Registry__UnknownTask" and err["data"]["args"] == {"taskId": UNKNOWN}
    _, tid = training
    err = rpc.error("getReceipt", {"task_id": "0x" + tid.hex()}, REVERTED)
    assert err["data"]["error"] == "Registry__WrongStatus" and err["data"]["args"]["have"] == 2  # Training


def test_two_rounds_and_the_receipt_through_the_gateway(rpc, roles, training):
    _, tid = training
    t0, syncer, base = roles["t0"], roles["syncer"], roles["base"]
    credits = [0, 0]
    for rnd in (0, 1):
        subs = [submission(t0, tid, rnd, frag) for frag in (0, 1)]
        for p in subs:  # the trainer's own commitments, in the commit phase
            commit_for(t0, p)
        err = rpc.error("submitGradient", subs[0], REVERTED)  # revealed too early: refused unsent
        assert err["data"]["error"] == "Registry__CommitPhaseOpen"
        past_commit_phase(base, tid)
        for frag, p in enumerate(subs):  # the reveals, relayed
            res = rpc.result("submitGradient", p)
            assert res["trainer"] == t0.address and res["relayer"] != t0.address
            assert res["event"]["fragment"] == frag and res["event"]["trainer"] == t0.address
        assert base.submissions_of(tid, rnd, t0.address)[0] == 0b11  # bit f: fragment f submitted
        com = rpc.result("finalizeRound", {"raw_transaction": commit_round_tx(syncer, tid, rnd, [0b11, 0], credits)})
        credits = [credits[0] + 1000, 0]  # fragments of 600 + 400 coordinates
        assert com["function"] == "commitRound" and com["round"] == rnd
        assert com["event"]["totalCredits"] == str(sum(credits)) or com["event"]["totalCredits"] == sum(credits)
    run = rpc.result("getRun", {"task_id": "0x" + tid.hex()})
    assert run["status"] == "COMPLETED" and [r["accepted_bitmaps"] for r in run["rounds"]] == [[3, 0], [3, 0]]
    base.mine(seconds=base.get_run(tid).challenge_seconds + 1)
    syncer.seal_root_run(tid)
    rec = rpc.result("getReceipt", {"task_id": "0x" + tid.hex()})
    assert rec["verifier_accepts"] is True
    assert rec["run_root"] == "0x" + base.get_receipt(tid).run_root.hex() and rec["rounds"] == 2


def test_misdirected_transactions_are_refused_unsent(rpc, roles, posted):
    spec, tid = posted
    t0, sponsor = roles["t0"], roles["sponsor"]
    before, sponsor_before = _nonce(t0), _nonce(sponsor)
    enroll = enroll_tx(t0, tid, STAKE)
    err = rpc.error("postTask", {"raw_transaction": enroll}, TX_REJECTED)  # another function
    assert err["data"]["reason"] == "function" and err["data"]["got"] == "enrollTrainerWithPermit"
    err = rpc.error("finalizeRound", {"raw_transaction": enroll}, TX_REJECTED)
    assert err["data"]["expected"] == ["commitRound"]
    token = t0.token.address  # a registry call sent to another contract
    err = rpc.error("enrollTrainer", {"raw_transaction": signed_tx(t0, "enrollTrainer", tid, STAKE, "did:x",
                                                                    to=token)}, TX_REJECTED)
    assert err["data"]["reason"] == "to" and err["data"]["got"] == token
    err = rpc.error("enrollTrainer", {"raw_transaction": signed_tx(t0, "approve", t0.registry.address, STAKE,
                                                                    contract="TenzroToken")}, TX_REJECTED)
    assert err["data"]["reason"] == "to"
    err = rpc.error("enrollTrainer", {"raw_transaction": signed_tx(t0, "enrollTrainer", tid, STAKE, "did:x",
                                                                    chain_id=1)}, TX_REJECTED)
    assert err["data"] == {"reason": "chain_id", "expected": t0.chain_id, "got": 1}
    err = rpc.error("postTask", {"raw_transaction": signed_tx(sponsor, "cancelTask", tid)}, TX_REJECTED)
    assert err["data"]["got"] == "cancelTask"
    assert _nonce(t0) == before and _nonce(sponsor) == sponsor_before
    assert roles["base"].get_run(tid).enrolled_count == 0  # nothing reached the chain


def test_reverts_are_decoded_before_and_after_mining(rpc, roles, posted, bare_gateway):
    spec, tid = posted
    t0 = roles["t0"]
    rpc.result("enrollTrainer", {"raw_transaction": enroll_tx(t0, tid, STAKE)})
    again = enroll_tx(t0, tid, STAKE)
    before = _nonce(t0)
    err = rpc.error("enrollTrainer", {"raw_transaction": again}, REVERTED)  # simulated: never broadcast
    assert err["data"]["error"] == "Registry__AlreadyEnrolled"
    assert err["data"]["args"] == {"taskId": "0x" + tid.hex(), "trainer": t0.address} and "tx_hash" not in err["data"]
    assert _nonce(t0) == before
    err = rpc.error("postTask", {"raw_transaction": post_task_tx(roles["sponsor"], spec)}, REVERTED)
    assert err["data"]["error"] == "Registry__TaskExists"
    # the bare gateway relays without simulating: the revert comes from the mined receipt
    bare = Rpc(bare_gateway.url)
    err = bare.error("enrollTrainer", {"raw_transaction": again}, REVERTED)
    assert err["data"]["error"] == "Registry__AlreadyEnrolled" and err["data"]["tx_hash"].startswith("0x")
    assert err["data"]["block"] > 0 and _nonce(t0) == before + 1  # mined, status 0
    rcpt = t0.w3.eth.get_transaction_receipt(err["data"]["tx_hash"])
    assert rcpt["status"] == 0


def test_the_same_signed_transaction_twice_is_one_transaction(roles, posted, bare_gateway):
    _, tid = posted
    raw = enroll_tx(roles["t1"], tid, STAKE)
    bare = Rpc(bare_gateway.url)  # no simulation: the second relay reaches the node, which has it mined
    first = bare.result("enrollTrainer", {"raw_transaction": raw})
    second = bare.result("enrollTrainer", {"raw_transaction": raw})
    assert second["tx_hash"] == first["tx_hash"] and second["block_number"] == first["block_number"]
    assert roles["base"].get_run(tid).enrolled_count == 1


def test_submit_gradient_refusals(rpc, roles, training, bare_gateway):
    _, tid = training
    t0, outsider = roles["t0"], roles["outsider"]
    good = submission(t0, tid, 0, 0)
    err = rpc.error("submitGradient", submission(outsider, tid, 0, 0), BAD_SIGNATURE)  # not enrolled
    assert err["data"]["recovered"] == outsider.address
    err = rpc.error("submitGradient", dict(good, cid="bafyother"), BAD_SIGNATURE)  # tampered after signing
    assert err["data"]["recovered"] != t0.address
    err = rpc.error("submitGradient", dict(good, signature="0x" + "11" * 10), BAD_SIGNATURE)  # malformed
    err = rpc.error("submitGradient", dict(good, trainer=roles["t1"].address), BAD_SIGNATURE)
    assert err["data"] == {"recovered": t0.address, "trainer": roles["t1"].address}
    err = rpc.error("submitGradient", dict(good, task_id=UNKNOWN), REVERTED)
    assert err["data"]["error"] == "Registry__UnknownTask"
    err = Rpc(bare_gateway.url).error("submitGradient", good, NO_RELAYER)
    assert "relayer" in err["message"]
    assert roles["base"].submissions_of(tid, 0, t0.address)[0] == 0  # none of these reached the chain
    commit_for(t0, good)  # the trainer commits to ``good`` in the commit phase, not to ``other``
    other = submission(t0, tid, 0, 1)
    past_commit_phase(roles["base"], tid)
    err = rpc.error("submitGradient", other, REVERTED)  # a reveal of nothing the trainer committed to
    assert err["data"]["error"] == "Registry__NotCommitted"
    assert rpc.result("submitGradient", dict(good, trainer=t0.address))["trainer"] == t0.address
    err = rpc.error("submitGradient", good, REVERTED)
    assert err["data"]["error"] == "Registry__DuplicateSubmission"
    err = rpc.error("submitGradient", submission(t0, tid, 1, 0), REVERTED)
    assert err["data"]["error"] == "Registry__WrongRound" and err["data"]["args"]["given"] == 1
