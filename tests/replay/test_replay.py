"""`tenzro train verify-receipt`: the off-chain replay of sealed runs, honest and faulty.

The runs are played by `run_driver` (an independent implementation of the protocol's round);
the replay must accept the honest one bit for bit and name the first thing that is wrong in
the faulty ones."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from eth_utils import keccak, to_checksum_address

import run_driver as drv
from stack import free_port
from tenzro_operator import receipt as rc
from tenzro_operator.cli import cli
from tenzro_operator.errors import IpfsUnavailable
from tenzro_operator.ipfs import IpfsClient
from tenzro_operator.keys import anvil_account
from tenzro_operator.replay import ReplayError, verify_receipt
from tenzro_operator.roles.sponsor import SpecDraft, build_spec, post_task

pytestmark = pytest.mark.slow


def test_honest_run_verifies_by_replay_and_on_chain(stack, honest_run):
    chain = stack.chain()
    seen = []
    report = verify_receipt(chain, stack.ipfs, honest_run.task_id, progress=lambda *a: seen.append(a))
    assert report.ok, report.first_mismatch
    assert report.verifier_ok and report.deployed_verifier_ok and report.tampered_refused
    # 2 rounds x 2 trainers x 2 fragments, each fetched, hashed, decoded, aggregated.
    assert [r.round for r in report.rounds] == [0, 1]
    assert report.payloads_checked == 8 and all(r.accepted == 4 for r in report.rounds)
    # The driver's own weights roots (computed while playing) are what the receipt commits to.
    rec = chain.get_receipt(honest_run.task_id)
    assert rec.final_model_hash == honest_run.weights_roots[-1]
    assert rc.decode_receipt(rec.serialized).rounds == 2
    assert ("round", 2, 2) in seen and ("payload", 4, 4) in seen
    assert report.to_json()["ok"] is True and json.dumps(report.to_json())


def test_payload_that_does_not_hash_is_named(stack, bad_hash_run):
    report = verify_receipt(stack.chain(), stack.ipfs, bad_hash_run.task_id)
    assert not report.ok
    first = report.first_mismatch
    bad_trainer = bad_hash_run.trainers[1]
    assert first.round == 1
    assert first.what.startswith(f"round 1 fragment 0 trainer {bad_trainer}") and "sha256 vs payloadHash" in first.what
    assert report.rounds[0].ok
    # Everything else in the run is consistent: that one payload is the only problem.
    assert len(report.mismatches) == 1
    # The receipt itself is well formed and the verifier accepts it: only a replay catches this.
    assert report.verifier_ok


def test_committed_weights_that_are_not_the_aggregate_are_named(stack, perturbed_run):
    report = verify_receipt(stack.chain(), stack.ipfs, perturbed_run.task_id)
    assert not report.ok
    first = report.first_mismatch
    assert first.round == 0 and first.what == "round 0 fragment 1 weights sha256 (recomputed vs committed)"
    assert {m.what for m in report.rounds[0].mismatches} >= {
        "round 0 weights root (recomputed vs getRound)", "round 0 round digest (recomputed vs receipt)"}
    assert not any("fragment 0" in m.what for m in report.rounds[0].mismatches)
    # The replay continues from the committed weights: round 1 (an honest round) checks out.
    assert report.rounds[1].ok
    assert any(m.what == "run root (recomputed by replay vs receipt)" for m in report.receipt_checks)


def test_commitment_only_replay_cannot_see_wrong_weights(stack, perturbed_run, honest_run):
    """Without re-aggregation, a self-consistent but wrong run passes: the payload replay is what matters."""
    quick = verify_receipt(stack.chain(), stack.ipfs, perturbed_run.task_id, check_payloads=False)
    assert quick.ok and quick.payloads_checked == 0
    assert verify_receipt(stack.chain(), stack.ipfs, honest_run.task_id, check_payloads=False).ok


def test_verifier_answers_raw_bytes_and_refuses_a_tampered_root(stack, honest_run):
    chain = stack.chain()
    rec = chain.get_receipt(honest_run.task_id)
    deployed = chain.deployment.contract("ReceiptVerifier").address
    for to in (rc.VERIFIER_ADDRESS, deployed):

        def call(root: bytes, to=to) -> bytes:
            return bytes(chain.w3.eth.call({"to": to, "data": "0x" + (rec.serialized + root).hex()}))

        assert call(rec.run_root) == b"\x01"
        for i in (0, 31):
            bad = bytearray(rec.run_root)
            bad[i] ^= 0x80
            assert call(bytes(bad)) == b"\x00"
        assert call(rc.run_root(rec.serialized[:-1] + b"\x00")) == b"\x00"  # root of other bytes, these bytes


def test_unknown_run_is_a_clear_error(stack):
    with pytest.raises(ReplayError, match="no run with task id"):
        verify_receipt(stack.chain(), stack.ipfs, keccak(text="never-posted"))


def test_unsealed_run_is_a_clear_error(stack, dataset):
    sponsor = stack.chain(drv.SPONSOR)
    draft = SpecDraft(task_id="replay-unsealed", sponsor_address=anvil_account(drv.SPONSOR).address,
                      fragment_count=2, trainer_count=2, quorum=2, inner_steps=2, max_rounds=2)
    spec = build_spec(stack.ipfs, draft, dataset)
    task_id, _ = post_task(sponsor, stack.ipfs, spec)
    with pytest.raises(ReplayError, match="ENROLLING, not SEALED"):
        verify_receipt(stack.chain(), stack.ipfs, task_id)


def test_ipfs_down_is_a_clear_error(stack, honest_run):
    dead = IpfsClient(f"http://127.0.0.1:{free_port()}", timeout_s=2, retries=1, backoff_s=0.05)
    with pytest.raises(IpfsUnavailable, match="IPFS node is not answering"):
        verify_receipt(stack.chain(), dead, honest_run.task_id)


def test_cli_verify_receipt(stack, honest_run, perturbed_run):
    common = ["--rpc", stack.rpc_url, "--deployments", str(stack.deployments), "--ipfs", stack.ipfs_url]
    ok = CliRunner().invoke(cli, ["train", "verify-receipt", "--task-id", "0x" + honest_run.task_id.hex(),
                                  "--format", "json", *common])
    assert ok.exit_code == 0, ok.output
    out = json.loads(ok.output)
    assert out["ok"] is True and out["first_mismatch"] is None and out["payloads_checked"] == 8
    bad = CliRunner().invoke(cli, ["train", "verify-receipt", "--task-id", perturbed_run.task_name, *common])
    assert bad.exit_code == 1
    assert "first mismatch: round 0 fragment 1 weights sha256" in bad.output


def test_honest_rejection_is_confirmed(stack, rejection_run):
    """A NaN payload rejected (and slashed) by the syncer: the replay re-checks the claim and passes."""
    chain = stack.chain()
    bad = rejection_run.trainers[1]
    assert chain.submissions_of(rejection_run.task_id, 0, to_checksum_address(bad))[1] == 0b10  # rejected on-chain
    assert chain.trainer_stats(rejection_run.task_id, bad).slashed > 0
    report = verify_receipt(chain, stack.ipfs, rejection_run.task_id)
    assert report.ok, report.first_mismatch
    assert report.rounds[0].accepted == 3 and report.rounds[1].accepted == 4


def test_false_rejection_is_named(stack, false_rejection_run):
    report = verify_receipt(stack.chain(), stack.ipfs, false_rejection_run.task_id)
    assert not report.ok
    honest = false_rejection_run.trainers[0]
    assert [m.what for m in report.mismatches] == [f"round 1 fragment 0 trainer {honest} rejection 'NonFinite'"]
    assert report.first_mismatch.got == "a valid payload"
