"""The `tenzro` CLI through click's CliRunner, against the real chain and IPFS node: JSON for
scripts, tables for people, and one clear line (exit 1) for every operator error."""

from __future__ import annotations

import hashlib
import json
import re

from click.testing import CliRunner

from op_stack import PW_ENV, ensure_syncer_stake, make_spec, one_line_error, post_root_run
from stack import MIN_SYNCER_STAKE, TOKEN, free_port
from tenzro_operator.cli.main import cli
from tenzro_operator.keys import anvil_account, create_keystore
from tenzro_operator.spec import canonical_json, spec_hash


def test_get_run_json_and_table(run_cli, roles, running_task):
    spec, tid = running_task
    res = run_cli("train", "get-run", "--task-id", spec.task_id, "--format", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    run = roles["base"].get_run(tid)
    assert doc["task_id"] == "0x" + tid.hex()
    assert doc["status"] == "TRAINING" and doc["current_round"] == run.current_round
    assert doc["reward_pool"] == spec.reward_pool and doc["aggregation"] == "TrimmedMean"
    assert (doc["syncer_fee_bps"], doc["syncer_bond"]) == (100, "10000000000000000000")
    assert doc["enrollment_deadline"] == run.posted_at + 3600 and doc["syncer"] == roles["syncer"].address
    assert doc["syncer_replaceable_at"] == run.syncer_replaceable_at > 0 and doc["syncer_fees_accrued"] == "0"
    assert [t["trainer"] for t in doc["trainers"]] == roles["base"].trainers_of(tid)
    # the 0x-hex32 form of the id works too
    res2 = run_cli("train", "get-run", "--task-id", "0x" + tid.hex(), "--format", "json")
    assert json.loads(res2.output)["spec_hash"] == doc["spec_hash"]
    table = run_cli("train", "get-run", "--task-id", spec.task_id)
    assert table.exit_code == 0 and "TRAINING" in table.output and "1,000 TNZO" in table.output
    assert "syncer bond" in table.output and "10 TNZO" in table.output and "100 bps of the pool" in table.output
    # times as ISO-8601 UTC with the raw unix seconds; --atto gives exact atto-units
    from datetime import datetime, timezone

    iso = datetime.fromtimestamp(run.round_deadline, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert f"{iso} ({run.round_deadline})" in table.output
    exact = run_cli("train", "get-run", "--task-id", spec.task_id, "--atto")
    assert exact.exit_code == 0 and f"{spec.reward_pool} atto" in exact.output and "TNZO" not in exact.output


def test_rpc_down_is_one_clear_line(run_cli):
    url = f"http://127.0.0.1:{free_port()}"
    line = one_line_error(run_cli("train", "get-run", "--task-id", "x", "--format", "json", rpc=url))
    assert url in line and "not answering" in line and "make devnet-up" in line


def test_unknown_task_and_receipt_before_seal(run_cli, running_task):
    spec, _ = running_task
    line = one_line_error(run_cli("train", "get-run", "--task-id", "no-such-task"))
    assert "no run with task id 'no-such-task'" in line and "list-runs" in line
    # a hex id that is not 32 bytes is refused, not hashed as a name
    res = run_cli("train", "get-run", "--task-id", "0x1234")
    assert res.exit_code == 2 and "64" in res.output and "Traceback" not in res.output
    line = one_line_error(run_cli("train", "get-receipt", "--task-id", spec.task_id))
    assert "getReceipt reverted" in line


def test_a_run_without_its_round_state_cannot_be_enrolled_in(run_cli, roles, keystores):
    """A sponsor that posts by hand and never sends ``useRootFlow`` (the run's initial fragments
    root and outer rule) gets a run nobody can stake in: the registry refuses the enrollment by
    name (in one line, nothing staked), while the read model still shows the run Enrolling."""
    spec = make_spec()
    roles["sponsor"].post_task(spec, "bafyspec")  # no useRootFlow
    line = one_line_error(run_cli("train", "enroll-trainer", "--task-id", spec.task_id, "--stake", "100", "--did",
                                  "did:tenzro:machine:0", keystore=keystores["t0"]))
    assert "Registry__NotRootFlow" in line
    res = run_cli("train", "get-run", "--task-id", spec.task_id, "--format", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["status"] == "ENROLLING" and doc["enrolled_count"] == 0


def test_post_task_pins_canonical_spec_and_escrows(run_cli, roles, keystores, tmp_path, ipfs_url, real_spec):
    from tenzro_operator.ipfs import IpfsClient

    spec, f = real_spec()
    sponsor = roles["sponsor"]
    pool_before = sponsor.token_balance()
    res = run_cli("train", "post-task", "--spec", str(f), "--format", "json", keystore=keystores["sponsor"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    run = roles["base"].get_run(spec.task_id_bytes)
    assert run.spec_cid == out["spec_cid"]
    pinned = IpfsClient(ipfs_url).cat(out["spec_cid"])
    assert pinned == canonical_json(spec)
    assert hashlib.sha256(pinned).digest() == run.spec_hash == spec_hash(spec)
    assert sponsor.token_balance() == pool_before - spec.reward_pool_atto
    # posting it again is refused by name, in one line
    line = one_line_error(run_cli("train", "post-task", "--spec", str(f), keystore=keystores["sponsor"]))
    assert "Registry__TaskExists" in line


def test_post_task_errors(run_cli, keystores, tmp_path, ipfs_url, real_spec):
    spec, _ = real_spec()
    raw = spec.to_json_obj()
    raw["quorum"] = 5
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(raw))
    line = one_line_error(run_cli("train", "post-task", "--spec", str(bad), keystore=keystores["sponsor"]))
    assert str(bad) in line and "quorum" in line
    good = tmp_path / "good.json"
    good.write_text(json.dumps(spec.to_json_obj()))
    # the keystore of someone other than the spec's sponsor
    line = one_line_error(run_cli("train", "post-task", "--spec", str(good), keystore=keystores["t0"]))
    assert "is not the keystore's account" in line
    # wrong password
    line = one_line_error(run_cli("train", "post-task", "--spec", str(good), keystore=keystores["sponsor"],
                                  env={PW_ENV: "nope"}))
    assert "wrong password" in line and "nope" not in line
    # IPFS down
    dead = f"http://127.0.0.1:{free_port()}"
    line = one_line_error(run_cli("train", "post-task", "--spec", str(good), keystore=keystores["sponsor"],
                                  ipfs=dead))
    assert dead in line


def _root_run(roles, **overrides):
    spec = make_spec(**overrides)
    post_root_run(roles["sponsor"], spec)
    return spec


def _commit_file(tmp_path, tid: str, round_: int, bitmaps: list[int], credits: list[int]):
    commit = {"task_id": tid, "round": round_, "fragments_root": "0x" + "44" * 32, "accepted_bitmaps": bitmaps,
              "previous_credits": credits, "fragment_hashes": ["0x" + "11" * 32, "0x" + "22" * 32],
              "transcript_hash": "0x" + "33" * 32, "transcript_cid": "tc"}
    cf = tmp_path / f"commit-{round_}.json"
    cf.write_text(json.dumps(commit))
    return cf


def test_enroll_submit_finalize_list_by_hand(run_cli, roles, keystores, tmp_path, ipfs_url):
    from tenzro_operator.ipfs import IpfsClient

    spec = _root_run(roles, grace_window_ms=10_000)  # a commit phase of 5 s
    tid = spec.task_id
    syncer = roles["syncer"]
    ensure_syncer_stake(syncer, spec.syncer_bond_atto, MIN_SYNCER_STAKE)
    # no election while the run is Enrolling: it is refused by name, in one line
    line = one_line_error(run_cli("train", "elect-syncer", "--task-id", tid, keystore=keystores["syncer"]))
    assert "Registry__WrongStatus" in line
    for i, ks in enumerate((keystores["t0"], keystores["t1"])):
        res = run_cli("train", "enroll-trainer", "--task-id", tid, "--stake", "100", "--did", f"did:tenzro:machine:{i}",
                      "--format", "json", keystore=ks)
        assert res.exit_code == 0, res.output
        assert json.loads(res.output)["shard"] == i
    # the M-th enrollment opened round 0: anyone (here a trainer) runs the two-step election
    res = run_cli("train", "elect-syncer", "--task-id", tid, "--format", "json", keystore=keystores["t0"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["syncer"] == syncer.address  # the only candidate
    payload = tmp_path / "delta.safetensors"
    payload.write_bytes(b"not really safetensors, but bytes are bytes" * 10)
    # the forced path by hand: committed in the commit phase, revealed once it closed
    res = run_cli("train", "submit-gradient", "--task-id", tid, "--round", "0", "--fragment", "1", "--payload",
                  str(payload), "--skip-check", "--format", "json", keystore=keystores["t0"])
    assert res.exit_code == 0, res.output
    sub = json.loads(res.output)
    assert IpfsClient(ipfs_url).cat(sub["cid"]) == payload.read_bytes()
    assert sub["payload_sha256"] == "0x" + hashlib.sha256(payload.read_bytes()).hexdigest()
    assert roles["base"].submissions_of(spec.task_id_bytes, 0, anvil_account(3).address)[0] == 0b10
    # the same command again, after the commit phase, reveals again: refused by name
    line = one_line_error(run_cli("train", "submit-gradient", "--task-id", tid, "--round", "0", "--fragment", "1",
                                  "--payload", str(payload), "--skip-check", keystore=keystores["t0"]))
    assert "Registry__DuplicateSubmission" in line
    # quorum K=1 per fragment before the deadline: fragment 0 has none -> refused by name
    cf = _commit_file(tmp_path, tid, 0, [2, 0], [0, 0])
    line = one_line_error(run_cli("train", "finalize-round", "--commit", str(cf), keystore=keystores["syncer"]))
    assert "Registry__QuorumNotMet" in line
    roles["base"].mine(seconds=11)  # past the deadline any accepted set is allowed (an omission is proven after)
    res = run_cli("train", "finalize-round", "--commit", str(cf), "--format", "json", keystore=keystores["syncer"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["total_credits"] == str(spec.require_protocol().fragment_sizes[1])
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"task_id": tid, "round": 1, "fragments_root": "0x12"}))
    line = one_line_error(run_cli("train", "finalize-round", "--commit", str(bad), keystore=keystores["syncer"]))
    assert "not a round commit" in line and "bad.json" in line
    res = run_cli("train", "list-runs", "--format", "json", "--limit", "1000")
    runs = {r["task_id"]: r for r in json.loads(res.output)["runs"]}
    assert runs["0x" + spec.task_id_bytes.hex()]["current_round"] == 1
    table = run_cli("train", "list-runs", "--limit", "1000", env={"COLUMNS": "400"})
    assert table.exit_code == 0, table.output
    # the full 0x id, the posting time in ISO-8601; this run's spec CID is a placeholder, so its name is "?"
    row = next(line for line in table.output.splitlines() if spec.task_id_bytes.hex() in line)
    assert "0x" + spec.task_id_bytes.hex() in row and "│ ? " in row
    assert re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", row)
    stats = json.loads(run_cli("train", "trainer-stats", "--task-id", tid, "--trainer", anvil_account(3).address,
                               "--format", "json").output)
    # accepted from the committed bitmaps; submitted comes from the transcripts, which this run has none of
    assert stats["accepted"] == 1 and stats["submitted"] is None and stats["transcript_errors"]
    table = run_cli("train", "trainer-stats", "--task-id", tid, "--trainer", anvil_account(3).address,
                    env={"COLUMNS": "400"}).output
    exact = run_cli("train", "trainer-stats", "--task-id", tid, "--trainer", anvil_account(3).address, "--atto",
                    env={"COLUMNS": "400"}).output
    assert "100 TNZO" in table and f"{100 * TOKEN}" in exact and "TNZO" not in exact


def test_close_enrollment_seal_and_claim_by_hand(run_cli, roles, keystores, tmp_path):
    """A one-round run driven through the CLI: after its enrollment deadline a trainer (anyone)
    opens round 0 with one of two slots filled, the syncer is elected and commits the round by
    hand, someone other than the syncer seals once the challenge window has passed, and the
    syncer claims its fee; refusals are one line each."""
    spec = _root_run(roles, max_rounds=1, enrollment_window_ms=15_000)
    tid, syncer, base = spec.task_id, roles["syncer"], roles["base"]
    ensure_syncer_stake(syncer, spec.syncer_bond_atto, MIN_SYNCER_STAKE)
    # a DID that is not one is refused before any transaction (it would be stored on-chain as is)
    res = run_cli("train", "enroll-trainer", "--task-id", tid, "--stake", "100", "--did", "hello",
                  keystore=keystores["t0"])
    assert res.exit_code == 2 and "Invalid value for --did: 'hello' is not a DID" in res.output
    assert not base.trainer_stats(spec.task_id_bytes, roles["trainers"][0].address).enrolled
    assert run_cli("train", "enroll-trainer", "--task-id", tid, "--stake", "100", "--did", "did:tenzro:machine:t0",
                   keystore=keystores["t0"]).exit_code == 0
    # enrolling twice: one line that says so, not the raw revert, and no transaction
    nonce = base.w3.eth.get_transaction_count(roles["trainers"][0].address)
    line = one_line_error(run_cli("train", "enroll-trainer", "--task-id", tid, "--stake", "100", "--did",
                                  "did:tenzro:machine:t0", keystore=keystores["t0"]))
    assert "already enrolled" in line and "as trainer 0" in line and "Registry__" not in line
    assert base.w3.eth.get_transaction_count(roles["trainers"][0].address) == nonce
    line = one_line_error(run_cli("train", "close-enrollment", "--task-id", tid, keystore=keystores["t0"]))
    assert "Registry__EnrollmentStillOpen" in line
    base.mine(seconds=16)
    res = run_cli("train", "close-enrollment", "--task-id", tid, "--format", "json", keystore=keystores["t0"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["round"] == 0
    assert base.get_run(spec.task_id_bytes).status.name == "TRAINING"
    assert run_cli("train", "elect-syncer", "--task-id", tid, keystore=keystores["t1"]).exit_code == 0
    assert "Registry__WrongStatus" in one_line_error(run_cli("train", "seal", "--task-id", tid,
                                                             keystore=keystores["t1"]))
    base.mine(seconds=31)  # past the round's deadline: an empty round may be committed
    cf = _commit_file(tmp_path, tid, 0, [0], [0])
    assert run_cli("train", "finalize-round", "--commit", str(cf), keystore=keystores["syncer"]).exit_code == 0
    line = one_line_error(run_cli("train", "seal", "--task-id", tid, keystore=keystores["t1"]))
    assert "Registry__ChallengeWindowOpen" in line  # the last round can still be proven wrong
    base.mine(seconds=spec.challenge_window_ms // 1000 + 1)
    res = run_cli("train", "seal", "--task-id", tid, "--format", "json", keystore=keystores["t1"])  # not the syncer
    assert res.exit_code == 0, res.output
    assert base.get_run(spec.task_id_bytes).status.name == "SEALED" and base.get_receipt(spec.task_id_bytes).run_root
    assert int(json.loads(res.output)["claimable"]) >= 0
    # one round of 1000 TNZO at 1 %: 10 TNZO accrued to the syncer, claimable once, by it only
    assert "Registry__NoSyncerFee" in one_line_error(run_cli("train", "claim-syncer-fee", "--task-id", tid,
                                                             keystore=keystores["t1"]))
    owed = syncer.withdrawable()
    res = run_cli("train", "claim-syncer-fee", "--task-id", tid, "--format", "json", keystore=keystores["syncer"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["amount"] == str(10 * TOKEN)
    assert syncer.withdrawable() == owed + 10 * TOKEN
    # after the claim period anyone sweeps what is left to the sponsor (nothing here: no credits,
    # so the seal gave the pool back at once), once the period is over
    line = one_line_error(run_cli("train", "sweep", "--task-id", tid, keystore=keystores["t1"]))
    assert "Registry__ClaimPeriodOpen" in line
    base.mine(seconds=91 * 24 * 3600)
    res = run_cli("train", "sweep", "--task-id", tid, "--format", "json", keystore=keystores["t1"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["amount"] == "0" and base.get_run(spec.task_id_bytes).reward_pool_left == 0


def test_cancel_task_refunds_pool_and_stakes(run_cli, roles, keystores):
    spec = make_spec()
    sponsor = roles["sponsor"]
    post_root_run(sponsor, spec, "bafyspec")
    assert run_cli("train", "enroll-trainer", "--task-id", spec.task_id, "--stake", "100",
                   "--did", "did:tenzro:machine:t1", keystore=keystores["t1"]).exit_code == 0
    line = one_line_error(run_cli("train", "cancel-task", "--task-id", spec.task_id, keystore=keystores["t1"]))
    assert "Registry__NotSponsor" in line
    owed_before = sponsor.withdrawable(sponsor.address)
    res = run_cli("train", "cancel-task", "--task-id", spec.task_id, "--format", "json", keystore=keystores["sponsor"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert (out["pool_refunded"], out["trainers_refunded"]) == (spec.reward_pool, 1)
    assert sponsor.withdrawable(sponsor.address) == owed_before + spec.reward_pool_atto
    assert roles["base"].get_run(spec.task_id_bytes).status.name == "CANCELLED"
    # cancelling twice is refused by name
    assert "Registry__WrongStatus" in one_line_error(run_cli("train", "cancel-task", "--task-id", spec.task_id,
                                                             keystore=keystores["sponsor"]))


def test_anyone_cancels_a_run_short_of_quorum_after_its_deadline(run_cli, roles, keystores):
    spec = make_spec(quorum=2, enrollment_window_ms=10_000)
    post_root_run(roles["sponsor"], spec, "bafyspec")
    assert run_cli("train", "enroll-trainer", "--task-id", spec.task_id, "--stake", "100",
                   "--did", "did:tenzro:machine:t1", keystore=keystores["t1"]).exit_code == 0
    roles["base"].mine(seconds=11)
    assert "Registry__NotEnoughEnrolled" in one_line_error(run_cli("train", "close-enrollment", "--task-id",
                                                                   spec.task_id, keystore=keystores["t0"]))
    owed = roles["trainers"][1].withdrawable()
    res = run_cli("train", "cancel-task", "--task-id", spec.task_id, "--format", "json", keystore=keystores["t0"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["trainers_refunded"] == 1
    assert roles["trainers"][1].withdrawable() == owed + 100 * TOKEN


def test_register_syncer_below_the_minimum_is_one_line(run_cli, roles, keystores):
    assert not roles["sponsor"].syncer_info().registered
    nonce = roles["base"].w3.eth.get_transaction_count(roles["sponsor"].address)
    line = one_line_error(run_cli("train", "register-syncer", "--stake", "1", keystore=keystores["sponsor"]))
    assert "at least 10 TNZO" in line and "minSyncerStake" in line and "got 1 TNZO" in line
    assert roles["base"].w3.eth.get_transaction_count(roles["sponsor"].address) == nonce  # nothing sent


def test_withdraw_with_nothing_and_missing_keystore(run_cli, keystores, stack):
    # an account of its own with gas and nothing owed (anvil's accounts may hold refunds of other
    # tests on this session's chain, whichever ran first)
    from eth_account import Account

    from tenzro_operator.devnet import rpc_call

    fresh = Account.create()
    rpc_call(stack.rpc_url, "anvil_setBalance", [fresh.address, hex(10**18)])
    path = keystores["t1"].with_name("fresh.json")
    create_keystore(path, "pw", fresh.key, scrypt_n=2**12)
    assert "Registry__NothingToWithdraw" in one_line_error(run_cli("train", "withdraw", keystore=path))
    res = run_cli("train", "withdraw")
    assert res.exit_code == 2 and "--keystore" in res.output


def test_verify_receipt_without_replay_says_so(run_cli, running_task):
    spec, _ = running_task
    try:
        import tenzro_operator.replay  # noqa: F401
    except ImportError:
        line = one_line_error(run_cli("train", "verify-receipt", "--task-id", spec.task_id))
        assert "tenzro_operator.replay" in line
    else:
        # wired through: a run that is not sealed yet is one clear line (replay's own tests cover the rest)
        line = one_line_error(run_cli("train", "verify-receipt", "--task-id", spec.task_id))
        assert "seal" in line.lower()


def test_keys_devnet(tmp_path):
    res = CliRunner().invoke(cli, ["keys", "devnet", "--dir", str(tmp_path), "--role", "sponsor=1",
                                   "--password-env", PW_ENV], env={PW_ENV: "pw"})
    assert res.exit_code == 0, res.output
    assert anvil_account(1).address in res.output
    from tenzro_operator.keys import load_keystore

    assert load_keystore(tmp_path / "sponsor.json", "pw").address == anvil_account(1).address
