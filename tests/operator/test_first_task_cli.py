"""The newcomer's path through the `tenzro` CLI (issue 11), against the real chain and IPFS node:
which chain the CLI talks to, funding a new key, writing a runnable spec without Python, posting
it (assets checked first, no allowance left behind), the local payload check of submit-gradient,
and the syncer's way out of the pool."""

from __future__ import annotations

import json

import pytest
import torch

from op_stack import PW_ENV, Anvil, ensure_syncer_stake, one_line_error, past_commit_phase
from stack import TOKEN
from tenzro_operator.keys import anvil_account, create_keystore


def _nonce(base, address: str) -> int:
    return base.w3.eth.get_transaction_count(address)


# ------------------------------------------------------------------------------ ports and chains


def test_rpc_defaults_to_the_deployment_record(run_cli, stack, tmp_path):
    env = {"TENZRO_DEPLOYMENTS": str(stack.deployments)}
    res = run_cli("train", "list-runs", "--format", "json", common=False, env=env)
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["total"] >= 0
    # the record names a dead URL: the error names that URL (it was the one used), not 8545
    rec = json.loads(stack.deployments.read_text())
    rec["rpc_url"] = "http://127.0.0.1:9"
    dead = tmp_path / "dead.json"
    dead.write_text(json.dumps(rec))
    line = one_line_error(run_cli("train", "list-runs", common=False, env={"TENZRO_DEPLOYMENTS": str(dead)}))
    assert "http://127.0.0.1:9" in line


def test_ipfs_defaults_to_the_deployment_record(stack, tmp_path):
    """A devnet on other ports (`make deploy IPFS_PORT=5002`) records its IPFS node; a verb without
    --ipfs uses it, not 5001 (where another checkout's node may answer). --ipfs still wins."""
    from tenzro_operator.cli.common import DEFAULT_IPFS, Ctx

    rec = json.loads(stack.deployments.read_text())
    rec["ipfs_url"] = "http://127.0.0.1:5002"
    other = tmp_path / "other-ports.json"
    other.write_text(json.dumps(rec))
    assert Ctx(None, other, None, PW_ENV, None).ipfs_url == "http://127.0.0.1:5002"
    assert Ctx(None, other, None, PW_ENV, "http://10.0.0.7:5001").ipfs_url == "http://10.0.0.7:5001"
    rec.pop("ipfs_url")
    older = tmp_path / "older.json"
    older.write_text(json.dumps(rec))  # a record written before it carried the IPFS URL
    assert Ctx(None, older, None, PW_ENV, None).ipfs_url == DEFAULT_IPFS
    assert Ctx(None, tmp_path / "missing.json", None, PW_ENV, None).ipfs_url == DEFAULT_IPFS


def test_another_devnet_with_the_same_addresses_is_refused(run_cli, stack, tmp_path):
    """A fresh anvil has the same chain id and would get the same contract addresses; its block 0
    differs from the one the record was written on, and every verb refuses it in one line."""
    other = Anvil(tmp_path).start()
    try:
        line = one_line_error(run_cli("train", "list-runs", rpc=other.url))
        assert other.url in line and "is not the chain" in line and "block 0" in line
    finally:
        other.stop()


def test_help_lists_the_environment_and_version(run_cli):
    res = run_cli("--help", common=False)
    for var in ("TENZRO_NODE_RPC", "TENZRO_DEPLOYMENTS", "TENZRO_IPFS_API", "TENZRO_KEYSTORE",
                "TENZRO_PASSWORD_ENV", "TENZRO_KEYSTORE_PASSWORD", "TENZRO_LOG_LEVEL"):
        assert var in res.output
    verb = run_cli("train", "get-run", "--help", common=False)
    assert "env var: TENZRO_NODE_RPC" in verb.output and "rpc_url recorded" in verb.output
    res = run_cli("--version", common=False)
    assert res.exit_code == 0 and res.output.startswith("tenzro, version ")


# ------------------------------------------------------------------------------ funding


def test_new_key_faucet_balance_transfer(run_cli, roles, tmp_path):
    ks = tmp_path / "new.json"
    res = run_cli("keys", "new", "--out", str(ks), "--password-env", PW_ENV, common=False)
    assert res.exit_code == 0, res.output
    addr = res.output.strip()
    bal = json.loads(run_cli("balance", "--format", "json", keystore=ks).output)
    assert (bal["address"], bal["eth_wei"], bal["tnzo"]) == (addr, "0", "0")
    res = run_cli("faucet", "--tnzo", "50", "--eth", "2", "--format", "json", keystore=ks)
    assert res.exit_code == 0, res.output
    bal = json.loads(run_cli("balance", "--address", addr, "--format", "json").output)
    assert (bal["eth_wei"], bal["tnzo"]) == (str(2 * 10**18), str(50 * TOKEN))
    to = anvil_account(8).address
    before = roles["base"].token_balance(to)
    res = run_cli("transfer", "--to", to, "--amount", "12.5", "--format", "json", keystore=ks)
    assert res.exit_code == 0, res.output
    assert roles["base"].token_balance(to) == before + 125 * TOKEN // 10
    line = one_line_error(run_cli("transfer", "--to", to, "--amount", "1000", keystore=ks))
    assert "needs 1,000 TNZO" in line and "faucet" in line
    res = run_cli("transfer", "--to", "0x1234", "--amount", "1", keystore=ks)
    assert res.exit_code == 2 and "not an address" in res.output
    table = run_cli("balance", keystore=ks)
    assert table.exit_code == 0 and "37.5 TNZO" in table.output


# ------------------------------------------------------------------------------ specs and posting


def test_new_spec_then_post_task_leaves_no_allowance(run_cli, roles, keystores, real_spec, ipfs_url):
    from tenzro_operator.ipfs import IpfsClient

    spec, path = real_spec(reward_pool="250", min_stake="5")
    proto = spec.require_protocol()
    assert (spec.trainer_count, spec.quorum, spec.architecture.fragment_count) == (2, 1, 2)
    assert spec.reward_pool_atto == 250 * TOKEN and proto.min_stake_atto == 5 * TOKEN
    ipfs = IpfsClient(ipfs_url)
    assert [len(ipfs.cat(w.cid)) > 0 for w in proto.initial_weights] == [True, True]
    sponsor = roles["sponsor"]
    res = run_cli("train", "post-task", "--spec", str(path), "--format", "json", keystore=keystores["sponsor"])
    assert res.exit_code == 0, res.output
    assert sponsor.allowance() == 0  # a permit of exactly the pool, spent by postTaskWithPermit
    # the same spec again: refused by name at the estimate, nothing sent, no allowance
    nonce = _nonce(roles["base"], sponsor.address)
    line = one_line_error(run_cli("train", "post-task", "--spec", str(path), keystore=keystores["sponsor"]))
    assert "Registry__TaskExists" in line
    assert sponsor.allowance() == 0 and _nonce(roles["base"], sponsor.address) == nonce


def test_post_task_refuses_unfetchable_or_mismatched_assets_before_any_token_moves(
        run_cli, roles, keystores, real_spec, tmp_path):
    from op_stack import make_spec

    sponsor = roles["sponsor"]
    base = roles["base"]

    def refused(path) -> str:
        nonce, tnzo = _nonce(base, sponsor.address), sponsor.token_balance()
        line = one_line_error(run_cli("train", "post-task", "--spec", str(path), keystore=keystores["sponsor"]))
        assert _nonce(base, sponsor.address) == nonce and sponsor.token_balance() == tnzo  # nothing sent
        return line

    example = tmp_path / "example.json"  # placeholder hashes, dataset CID of 'hello IPFS'
    example.write_text(json.dumps(make_spec().to_json_obj()))
    assert "dataset_ref" in refused(example)
    spec, _ = real_spec()
    raw = spec.to_json_obj()
    raw["metadata"]["protocol"]["initial_weights"][1]["sha256"] = "0x" + "22" * 32
    bad = tmp_path / "bad-weights.json"
    bad.write_text(json.dumps(raw))
    line = refused(bad)
    assert "initial_weights" in line and "fragment 1" in line and "sha256" in line
    raw = spec.to_json_obj()
    raw["dataset_hash"] = "0x" + "33" * 32
    bad.write_text(json.dumps(raw))
    line = refused(bad)
    assert "dataset_ref" in line and "hash" in line


def test_new_spec_defaults_to_the_benchmarked_defence(real_spec):
    """A spec written without choices gets ROBUST_DEFAULTS (the rule that holds every attack of
    trainer/benchmarks/results/attacks.md at 2 of 8): TrimmedMean 25 %, the norm screen, scoring."""
    from tenzro_operator.spec import DEFAULT_COMPRESSION
    from tenzro_trainer.config import ROBUST_DEFAULTS

    spec, _ = real_spec()
    proto = spec.require_protocol()
    assert spec.aggregation_name == ROBUST_DEFAULTS["rule"] == "TrimmedMean"
    assert spec.aggregation_params == ROBUST_DEFAULTS["rule_params"] == {"alpha_bps": 2500}
    assert (proto.flow, proto.score_min, proto.norm_multiple) == ("root", 0.0, ROBUST_DEFAULTS["norm_multiple"])
    assert proto.overlap_steps == 0
    spec, _ = real_spec(compression=None)  # every default: MXFP4 payloads
    assert DEFAULT_COMPRESSION == "mx_fp4"
    assert spec.require_protocol().compression == {"kind": "mx", "element": "fp4_e2m1", "block": 32,
                                                   "error_feedback": False}
    spec, _ = real_spec(no_scoring=True, aggregation="CoordinateMedian", norm_multiple="4",
                        overlap_steps="2")
    proto = spec.require_protocol()
    assert (spec.aggregation_name, proto.score_min, proto.norm_multiple, proto.overlap_steps) == \
        ("CoordinateMedian", None, 4.0, 2)


def test_new_spec_errors_are_one_line(run_cli, keystores, tmp_path, ipfs_url):
    from tenzro_operator.ipfs import IpfsClient

    pins_before = IpfsClient(ipfs_url).pins()
    out = tmp_path / "s.json"
    line = one_line_error(run_cli("train", "new-spec", "--data", str(tmp_path / "missing.csv"), "--task-id", "x",
                                  "--out", str(out), keystore=keystores["sponsor"]))
    assert "missing.csv" in line
    csv = tmp_path / "d.csv"
    csv.write_text("unique_id,ds,y\na,1,1.0\n")
    line = one_line_error(run_cli("train", "new-spec", "--data", str(csv), "--task-id", "x", "--preset", "huge",
                                  "--out", str(out), keystore=keystores["sponsor"]))
    assert "huge" in line
    line = one_line_error(run_cli("train", "new-spec", "--data", str(csv), "--task-id", "x", "--trainers", "2",
                                  "--quorum", "3", "--out", str(out), keystore=keystores["sponsor"]))
    assert "quorum" in line
    assert not out.exists()
    assert IpfsClient(ipfs_url).pins() == pins_before  # refused before the dataset or weights were pinned

    line = one_line_error(run_cli("train", "new-spec", "--data", str(csv), "--task-id", "x", "--inner-steps", "4",
                                  "--overlap-steps", "5", "--out", str(out), keystore=keystores["sponsor"]))
    assert "overlap_steps" in line and "inner_steps" in line
    line = one_line_error(run_cli("train", "new-spec", "--data", str(csv), "--task-id", "x", "--compression",
                                  "mx_fp5", "--out", str(out), keystore=keystores["sponsor"]))
    assert "--compression" in line and "unknown compression 'mx_fp5'" in line
    res = run_cli("train", "new-spec", "--data", str(csv), "--mixture-shares", "0.02", "0.22", "0.36", "0.40",
                  "--task-id", "x", "--out", str(out), keystore=keystores["sponsor"])
    assert res.exit_code == 2 and "--mixture-shares sets the shares of --data builtin:mixture" in res.output
    assert not out.exists()


def test_submit_gradient_of_a_compressed_task_takes_the_codec_s_payloads_only(run_cli, roles, keystores, real_spec,
                                                                             tmp_path):
    """A spec written with ``new-spec --compression mx_fp4``: ``submit-gradient`` checks and commits to
    an MXFP4 payload as the syncer decodes it, and refuses a dense one in one line."""
    from tenzro_operator.payload_encoder import PayloadEncoder
    from tenzro_operator.task_runtime import TaskRuntime
    from tenzro_trainer.codec import encode_fragment
    from tenzro_trainer.commitment import ChunkTree

    spec, path = real_spec(compression="mx_fp4", grace_window="8")  # a commit phase of 4 s
    assert spec.require_protocol().compression == {"kind": "mx", "element": "fp4_e2m1", "block": 32,
                                                   "error_feedback": False}
    assert run_cli("train", "post-task", "--spec", str(path), keystore=keystores["sponsor"]).exit_code == 0
    for i, who in enumerate(("t0", "t1")):  # M = 2 enrolled: round 0 opens
        assert run_cli("train", "enroll-trainer", "--task-id", spec.task_id, "--stake", "100",
                       "--did", f"did:tenzro:machine:{i}", keystore=keystores[who]).exit_code == 0
    runtime = TaskRuntime.from_spec(spec)
    t0 = roles["trainers"][0]
    g = torch.Generator().manual_seed(0)
    delta = {n: torch.randn(shape, generator=g) * 1e-2 for n, (shape, _) in runtime.layouts[1].items()}
    meta = dict(task=runtime.task, round=0, fragment=1, trainer=t0.address.lower(), dtype="float32",
                kind="pseudo_gradient")
    f = tmp_path / "delta.safetensors"
    f.write_bytes(encode_fragment(delta, meta))
    nonce = _nonce(roles["base"], t0.address)
    line = one_line_error(run_cli("train", "submit-gradient", "--task-id", spec.task_id, "--round", "0",
                                  "--fragment", "1", "--payload", str(f), keystore=keystores["t0"]))
    assert "not a payload of the codec (the task's" in line and "fp4_e2m1" in line
    assert _nonce(roles["base"], t0.address) == nonce  # nothing sent
    blob, flat = PayloadEncoder(runtime, tmp_path / "ef.safetensors").encode(0, 1, delta, meta)
    f.write_bytes(blob)
    res = run_cli("train", "submit-gradient", "--task-id", spec.task_id, "--round", "0", "--fragment", "1",
                  "--payload", str(f), "--format", "json", keystore=keystores["t0"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["payload_root"] == "0x" + ChunkTree(flat).root[0].hex()  # the commitment of the decoded vector
    assert roles["base"].submissions_of(spec.task_id_bytes, 0, t0.address)[0] == 0b10


def test_failed_enroll_takes_its_approval_back(run_cli, roles, keystores, real_spec):
    spec, path = real_spec()
    assert run_cli("train", "post-task", "--spec", str(path), keystore=keystores["sponsor"]).exit_code == 0
    t1 = roles["trainers"][1]
    before = t1.allowance()
    line = one_line_error(run_cli("train", "enroll-trainer", "--task-id", spec.task_id, "--stake", "5atto",
                                  "--did", "did:tenzro:machine:t1", keystore=keystores["t1"]))
    assert "Registry__StakeTooLow" in line
    assert t1.allowance() == before
    line = one_line_error(run_cli("train", "enroll-trainer", "--task-id", "never-posted", "--stake", "100",
                                  "--did", "did:tenzro:machine:t1", keystore=keystores["t1"]))
    assert "no run with task id 'never-posted'" in line


# ------------------------------------------------------------------------------ submit-gradient


def _payload(runtime, round_: int, fragment: int, fill: float = 0.01, **meta) -> bytes:
    from tenzro_trainer.codec import encode_fragment

    tensors = {n: torch.full(shape, fill, dtype=torch.float32) for n, (shape, _) in runtime.layouts[fragment].items()}
    md = dict(task=runtime.task, round=round_, fragment=fragment, trainer="t0", dtype="float32",
              kind="pseudo_gradient")
    md.update(meta)
    return encode_fragment(tensors, md)


def test_submit_gradient_checks_the_payload_locally(run_cli, roles, keystores, real_spec, tmp_path):
    from tenzro_operator.task_runtime import TaskRuntime
    from tenzro_trainer.codec import encode_fragment

    spec, path = real_spec(grace_window="8")
    assert run_cli("train", "post-task", "--spec", str(path), keystore=keystores["sponsor"]).exit_code == 0
    for i, who in enumerate(("t0", "t1")):
        assert run_cli("train", "enroll-trainer", "--task-id", spec.task_id, "--stake", "100",
                       "--did", f"did:tenzro:machine:{i}", keystore=keystores[who]).exit_code == 0
    runtime = TaskRuntime.from_spec(spec)
    base, t0 = roles["base"], roles["trainers"][0]
    f = tmp_path / "delta.safetensors"

    def refused(data: bytes, round_: int = 0, fragment: int = 1) -> str:
        f.write_bytes(data)
        nonce = _nonce(base, t0.address)
        line = one_line_error(run_cli("train", "submit-gradient", "--task-id", spec.task_id, "--round", str(round_),
                                      "--fragment", str(fragment), "--payload", str(f), keystore=keystores["t0"]))
        assert _nonce(base, t0.address) == nonce  # nothing sent
        return line

    assert "not a payload of the codec" in refused(b"not safetensors at all" * 8)
    tensors = {n: torch.full(shape, float("nan")) for n, (shape, _) in runtime.layouts[1].items()}
    nan = encode_fragment(tensors, dict(task=runtime.task, round=0, fragment=1, trainer="t0", dtype="float32",
                                        kind="pseudo_gradient"))
    assert "non_finite" in refused(nan)
    assert "fragment" in refused(_payload(runtime, 0, 0))  # fragment 0's payload sent as fragment 1
    other = {n: torch.zeros(shape) for n, (shape, _) in runtime.layouts[0].items()}
    wrong = encode_fragment(other, dict(task=runtime.task, round=0, fragment=1, trainer="t0", dtype="float32",
                                        kind="pseudo_gradient"))
    assert "payload rejected: names" in refused(wrong)  # fragment 0's tensors labelled fragment 1
    assert "'round': '3'" in refused(_payload(runtime, 3, 1))
    assert "round 0 is open" in refused(_payload(runtime, 0, 1), round_=1)
    assert "fragment 5 does not exist" in refused(_payload(runtime, 0, 1), fragment=5)
    f.write_bytes(_payload(runtime, 0, 1))
    res = run_cli("train", "submit-gradient", "--task-id", spec.task_id, "--round", "0", "--fragment", "1",
                  "--payload", str(f), "--format", "json", keystore=keystores["t0"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["l2_norm"] > 0
    assert base.submissions_of(spec.task_id_bytes, 0, t0.address)[0] == 0b10


# ------------------------------------------------------------------------------ syncer pool


def test_unregister_syncer_returns_the_stake(run_cli, roles, tmp_path):
    """Two calls: the first takes the candidate out of elections requested from then on, the
    second, once the elections requested before can no longer be resolved, credits the stake."""
    ks = tmp_path / "a9.json"
    create_keystore(ks, "pw", anvil_account(9).key, scrypt_n=2**12)
    base = roles["base"]
    line = one_line_error(run_cli("train", "unregister-syncer", keystore=ks))
    assert "is not a syncer candidate" in line
    assert run_cli("train", "register-syncer", "--stake", "10", keystore=ks).exit_code == 0
    owed = base.withdrawable(anvil_account(9).address)
    res = run_cli("train", "unregister-syncer", "--format", "json", keystore=ks)
    assert res.exit_code == 0, res.output
    leaving = json.loads(res.output)
    assert leaving["stake"] == str(10 * TOKEN)
    assert leaving["withdrawable_from_block"] == base.w3.eth.block_number + 257
    assert base.withdrawable(anvil_account(9).address) == owed
    line = one_line_error(run_cli("train", "unregister-syncer", keystore=ks))
    assert "SyncerChangePending" in line and str(leaving["withdrawable_from_block"]) in line
    base.w3.provider.make_request("anvil_mine", [hex(257)])
    res = run_cli("train", "unregister-syncer", "--format", "json", keystore=ks)
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["stake_released"] == str(10 * TOKEN)
    assert base.withdrawable(anvil_account(9).address) == owed + 10 * TOKEN
    assert not base.syncer_info(anvil_account(9).address).registered


def test_unregister_syncer_refused_while_syncing(run_cli, roles, keystores, running_task):
    line = one_line_error(run_cli("train", "unregister-syncer", keystore=keystores["syncer"]))
    assert "is the syncer of" in line and "not yet sealed" in line


@pytest.mark.parametrize("stake", ["1", "9.99"])
def test_register_syncer_below_the_minimum_sends_nothing(run_cli, roles, tmp_path, stake):
    ks = tmp_path / "a8.json"
    create_keystore(ks, "pw", anvil_account(8).key, scrypt_n=2**12)
    nonce = _nonce(roles["base"], anvil_account(8).address)
    line = one_line_error(run_cli("train", "register-syncer", "--stake", stake, keystore=ks))
    assert "minSyncerStake" in line
    assert _nonce(roles["base"], anvil_account(8).address) == nonce


def test_submit_gradient_refuses_a_payload_the_norm_screen_would_prove_an_outlier(run_cli, roles, keystores,
                                                                                real_spec, tmp_path, ipfs_url):
    """Against the previous round's accepted sums of the fragment (the reference the round's own
    forcing sybils cannot move), the registry's norm rule (PROTOCOL.md §4) would prove a 100x
    payload an outlier and slash its trainer: the CLI says so and sends nothing. Round 0 is
    committed by hand, with t1's and t2's forced payloads accepted on fragment 1."""
    from tenzro_operator.chain import SignedPayload
    from tenzro_operator.ipfs import IpfsClient
    from tenzro_operator.task_runtime import TaskRuntime
    from tenzro_operator.transcript import BlobRef, FragmentRecord, RoundTranscript, Submission

    # a commit phase of 12 s: t1 and t2 commit after the election and a model build, several CLI
    # starts, which took over 4 s on a loaded CI machine
    spec, path = real_spec(trainers="3", grace_window="24")
    assert run_cli("train", "post-task", "--spec", str(path), keystore=keystores["sponsor"]).exit_code == 0
    ks = dict(keystores)
    ks["t2"] = tmp_path / "t2.json"
    create_keystore(ks["t2"], "pw", anvil_account(5).key, scrypt_n=2**12)
    for i, who in enumerate(("t0", "t1", "t2")):
        assert run_cli("train", "enroll-trainer", "--task-id", spec.task_id, "--stake", "100",
                       "--did", f"did:tenzro:machine:{i}", keystore=ks[who]).exit_code == 0
    base, syncer = roles["base"], roles["syncer"]
    tid = spec.task_id_bytes
    ensure_syncer_stake(syncer, spec.syncer_bond_atto)
    assert syncer.run_syncer_election(tid) == syncer.address
    runtime = TaskRuntime.from_spec(spec)
    f = tmp_path / "delta.safetensors"
    f.write_bytes(_payload(runtime, 0, 1, fill=0.01))
    submit = ["train", "submit-gradient", "--task-id", spec.task_id, "--round", "0", "--fragment", "1",
              "--payload", str(f), "--no-wait"]
    for who in ("t1", "t2"):  # both commit in the phase; the same command after it reveals
        assert run_cli(*submit, keystore=ks[who]).exit_code == 0
    past_commit_phase(base, tid)
    for who in ("t1", "t2"):
        res = run_cli(*submit, keystore=ks[who])
        assert res.exit_code == 0 and "submitted" in res.output, res.output
    input_root = base.get_run(tid).weights_root
    accepted = []
    for ev in base.get_logs(base.run_start_block(base.get_run(tid)), base.block_number(), ["GradientSubmitted"],
                            task_id=tid):
        sp = SignedPayload.from_event(ev["args"])
        accepted.append(Submission(trainer=ev["args"]["trainer"].lower(), cid=sp.cid, sha256="0x" + sp.payload_hash.hex(),
                                   base_root="0x" + input_root.hex(), payload_root="0x" + sp.payload_root.hex(),
                                   payload_sumsq=sp.payload_sumsq, signature="0x" + sp.signature.hex()))
    assert len(accepted) == 2
    blob = BlobRef(cid="bafkreiweights", sha256="0x" + "00" * 32)
    tr = RoundTranscript(task_id="0x" + tid.hex(), round=0, rule={}, outer={}, input_weights_root="0x" + input_root.hex(),
                         weights_root="0x" + "55" * 32, accepted_count=2,
                         fragments=[FragmentRecord(fragment=0, accepted=[], rejected=[], weights=blob, aggregated=False),
                                    FragmentRecord(fragment=1, accepted=accepted, rejected=[], weights=blob,
                                                   aggregated=True)])
    with IpfsClient(ipfs_url) as ipfs:
        tcid = ipfs.add(tr.canonical_bytes())
    base.mine(seconds=26)  # past round 0's deadline: fragment 0 may stay without a submission
    syncer.commit_round(tid, 0, b"\x66" * 32, [0, 2, 2], [0, 0, 0], [b"\x11" * 32, b"\x22" * 32], tr.hash(), tcid)
    t0 = roles["trainers"][0]
    f.write_bytes(_payload(runtime, 1, 1, fill=1.0))  # 100x round 0's accepted values: 10,000x their sums
    nonce = _nonce(base, t0.address)
    line = one_line_error(run_cli("train", "submit-gradient", "--task-id", spec.task_id, "--round", "1",
                                  "--fragment", "1", "--payload", str(f), keystore=ks["t0"]))
    assert "NormOutlier" in line and "median of round 0's 2 accepted sums" in line
    assert _nonce(base, t0.address) == nonce  # nothing sent
    f.write_bytes(_payload(runtime, 1, 1, fill=0.02))  # within the screen: committed
    assert run_cli("train", "submit-gradient", "--task-id", spec.task_id, "--round", "1", "--fragment", "1",
                   "--payload", str(f), "--no-wait", keystore=ks["t0"]).exit_code == 0
    # list-runs names the run by its spec (fetched from IPFS and checked against the on-chain hash)
    table = run_cli("train", "list-runs", "--limit", "1000", env={"COLUMNS": "400"})
    row = next(line for line in table.output.splitlines() if spec.task_id_bytes.hex() in line)
    assert spec.task_id in row and "TRAINING" in row
