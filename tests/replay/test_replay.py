"""`tenzro train verify-receipt`: the off-chain replay of sealed root-flow runs, honest and faulty.

The runs are played by `run_driver` (an independent implementation of the root-flow round:
signed off-chain submissions, ``commitRound`` by root, ``sealRootRun``, Merkle claims); the replay
must accept the honest one bit for bit, confirm the honest syncer's rejections, and name the
first thing that is wrong in the faulty one."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from eth_utils import keccak, to_checksum_address

import run_driver as drv
from stack import free_port
from tenzro_operator import receipt as rc
from tenzro_operator.chain import SlashReason
from tenzro_operator.cli.main import cli
from tenzro_operator.errors import IpfsUnavailable
from tenzro_operator.ipfs import IpfsClient
from tenzro_operator.keys import anvil_account
from tenzro_operator.replay import ReplayError, verify_receipt
from tenzro_operator.roles.sponsor import SpecDraft, build_spec, post_task
from tenzro_operator.root_check import RootRoundChecker

pytestmark = pytest.mark.slow


def test_honest_run_verifies_by_replay_and_on_chain(stack, honest_run):
    chain = stack.chain()
    assert chain.is_root_flow(honest_run.task_id)
    seen = []
    report = verify_receipt(chain, stack.ipfs, honest_run.task_id, progress=lambda *a: seen.append(a))
    assert report.ok, report.first_mismatch
    assert report.verifier_ok and report.deployed_verifier_ok and report.tampered_refused
    # 2 rounds x 2 trainers x 2 fragments, each fetched, decoded and aggregated again.
    assert [r.round for r in report.rounds] == [0, 1]
    assert report.payloads_checked == 8 and all(r.accepted == 4 for r in report.rounds)
    # The driver's own weights roots (computed while playing) are what the registry committed and
    # what the receipt names.
    events = drv.committed(chain, honest_run.task_id)
    assert [bytes(events[r]["weightsRoot"]) for r in (0, 1)] == honest_run.weights_roots
    assert [events[r]["transcriptCid"] for r in (0, 1)] == honest_run.transcript_cids
    assert all(list(events[r]["acceptedBitmaps"]) == [0b11, 0b11] for r in (0, 1))
    rec = chain.get_receipt(honest_run.task_id)
    assert rec.final_model_hash == honest_run.weights_roots[-1]
    assert rc.decode_receipt(rec.serialized).rounds == 2
    assert ("receipt", 1, 1) in seen and ("round", 2, 2) in seen
    assert report.to_json()["ok"] is True and json.dumps(report.to_json())
    # The seal opened the claims: each trainer was paid floor(claimable x credits / total) for the
    # credits the registry summed from the committed bitmaps (each fragment weighs its size).
    (sealed,) = drv.events_named(chain, honest_run.task_id, "RootRunSealed")
    work = 2 * honest_run.spec.architecture.param_count
    assert honest_run.credits == [work, work] and chain.get_run(honest_run.task_id).total_credits == 2 * work
    assert honest_run.rewards == [sealed["claimable"] * work // (2 * work)] * 2 and honest_run.rewards[0] > 0
    claims = drv.events_named(chain, honest_run.task_id, "RewardClaimed")
    assert [(c["index"], c["credits"], c["reward"]) for c in claims] == \
        [(i, work, honest_run.rewards[i]) for i in (0, 1)]
    assert all(chain.claimed(honest_run.task_id, i) for i in (0, 1))


def test_an_accepted_payload_that_does_not_hash_to_its_signed_hash_is_named(stack, bad_hash_run):
    """The syncer accepted bytes that are not what the trainer signed (their sha256 is not the signed
    payloadHash): every commitment is consistent, only hashing the payload shows it."""
    report = verify_receipt(stack.chain(), stack.ipfs, bad_hash_run.task_id)
    assert not report.ok and report.rounds[0].ok and report.verifier_ok
    first = report.first_mismatch
    assert first.round == 1 and first.fragment == 0
    assert "does not hash to its signed payloadHash" in first.got and bad_hash_run.trainers[1] in first.got


def test_committed_weights_that_are_not_the_aggregate_are_named(stack, perturbed_run):
    chain = stack.chain()
    report = verify_receipt(chain, stack.ipfs, perturbed_run.task_id)
    assert not report.ok
    first = report.first_mismatch
    assert first.round == 0 and first.what == "round 0 fragment 1 state (recomputed vs committed)"
    assert first.got.startswith("fragment 1 coordinate 0: committed weight")  # the first perturbed value
    # The syncer's commitments agree with what it pinned (weights root, bitmaps, digests, receipt):
    # only the recomputation of the round sees the lie, and the receipt itself verifies.
    assert len(report.mismatches) == 1 and report.verifier_ok
    # The replay goes on from the committed weights: round 1 (an honest round) checks out.
    assert report.rounds[1].ok
    # What the replay found is what a watcher proves within the window: an aggregate proof at
    # fragment 1 (proveAggregate's arguments), not an unprovable difference.
    run = chain.get_run(perturbed_run.task_id)
    checker = RootRoundChecker.for_run(chain, stack.ipfs, perturbed_run.task_id, run, chain.run_start_block(run))
    res = checker.check(0, drv.committed(chain, perturbed_run.task_id)[0])
    assert (res.ok, res.kind, res.fragment, res.coordinate) == (False, "aggregate", 1, 0)
    claim, opening, signatures = res.proof
    assert claim[0] == perturbed_run.task_id and claim[1] == 0 and len(signatures) == 2


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
    assert "first mismatch: round 0 fragment 1 state (recomputed vs committed)" in bad.output


def test_honest_rejections_pass_the_replay(stack, rejection_run):
    """The honest syncer left both NaN payloads out: trainer 1's off-chain one (nothing on-chain,
    no slash) and trainer 0's forced one (proven invalid on-chain, slashed). The committed rounds
    aggregate only what was valid, and the replay passes."""
    chain = stack.chain()
    task = rejection_run.task_id
    t0, t1 = rejection_run.trainers
    events = drv.committed(chain, task)
    assert list(events[0]["acceptedBitmaps"]) == [0b11, 0b01]  # round 0: trainer 1's fragment 1 left out
    assert list(events[1]["acceptedBitmaps"]) == [0b10, 0b11]  # round 1: trainer 0's fragment 0 left out
    for r, f, who in ((0, 1, t1), (1, 0, t0)):
        tr = drv.transcript(stack.ipfs, events[r]["transcriptCid"])
        fr = tr.fragments[f]
        assert [(x.trainer, x.reason) for x in fr.rejected] == [(who, "NonFinite")]
        assert [x.trainer for x in fr.accepted] == [a for a in rejection_run.trainers if a != who]
    # off-chain: the registry never saw trainer 1's payload
    assert chain.submissions_of(task, 0, to_checksum_address(t1)) == (0, 0)
    assert chain.trainer_stats(task, t1).slashed == 0
    # forced: submitted and rejected on-chain, its trainer slashed for NonFinite
    assert chain.submissions_of(task, 1, to_checksum_address(t0)) == (0b01, 0b01)
    (slash,) = drv.events_named(chain, task, "TrainerSlashed")
    assert slash["trainer"].lower() == t0 and slash["reason"] == SlashReason.NON_FINITE
    assert chain.trainer_stats(task, t0).slashed == slash["amount"] > 0
    # each lost one fragment's credits (both fragments have the same size here)
    sizes = rejection_run.spec.require_protocol().fragment_sizes
    work = 2 * sum(sizes)
    assert rejection_run.credits == [work - sizes[0], work - sizes[1]]
    report = verify_receipt(chain, stack.ipfs, task)
    assert report.ok, report.first_mismatch
    assert [r.accepted for r in report.rounds] == [3, 3] and report.payloads_checked == 6
