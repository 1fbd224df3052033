"""A root-flow syncer that cannot fetch a forced payload demands the whole of it (contracts/PROTOCOL.md
§4 "Whole payload", issue #23 attack 5): ``challengeAvailability`` with chunk index 2^32 - 1, which
only every chunk answers. Before, the operator's syncer challenged chunk 0: a trainer that answered
that chunk alone and withheld the rest kept its submission live, and the honest syncer was convicted
whether it aggregated the payload (a withheld coordinate proves the aggregate wrong) or left it out
(``proveOmission``). Here the honest trainer daemon answers whole from its pinned copy; the syncer,
which still cannot fetch the CID (no node it reaches serves it), reads the payload from the answer's
on-chain bytes and credits it; nobody is slashed, the run seals, and a watcher that cannot fetch the
CID either checks the round from the same bytes."""

from __future__ import annotations

import threading
import time

import pytest
from roles_stack import SYNCER, TRAINERS, events, fail_first_fetch, post_small_task, syncer_daemon, trainer_daemon
from tenzro_operator.chain import ChunkOpening, RunStatus, SlashReason
from tenzro_operator.errors import InsufficientTokens, IpfsNotFound
from tenzro_operator.root_check import RootRoundChecker
from tenzro_operator.root_flow import committed_rounds

pytestmark = pytest.mark.timeout(400)


def _withheld_forced_run(dev, runner, tmp_path, quorum: int, answer_mid_finalize: bool = False, **forced_cfg):
    """A 2-trainer, 2-fragment, 1-round root-flow run whose trainer 0 delivers on the forced path
    only (commit, then reveal, on-chain; ``forced_cfg`` more of its config) and whose syncer can
    never fetch the first CID of trainer 0 it asks for. ``answer_mid_finalize``: trainer 0 answers
    a challenge only once the syncer has begun to finalize (or 12 s later), and the syncer's
    finalize goes on only once an answer is mined (or 30 s later), as when the answer lands while
    the syncer aggregates. Returns (task id, client, trainer 0's address, the failed
    fetches' CIDs, the daemons' exit codes)."""
    tid = post_small_task(dev, trainers=2, quorum=quorum, fragments=2, rounds=1, grace_window_ms=30_000,
                          challenge_window_ms=20_000)
    client = dev.client()
    forced = dev.client(TRAINERS[0]).address
    sync = syncer_daemon(dev, tid, tmp_path / "syncer", evaluate=False, fetch_retries=1, straggler_wait_s=30.0)
    failed = fail_first_fetch(sync, client, tid, forced, always=True)
    trainer = trainer_daemon(dev, TRAINERS[0], tid, tmp_path / "t0", force_onchain=True, publish_pubsub=False,
                             **forced_cfg)
    if answer_mid_finalize:
        in_finalize = threading.Event()
        finalize, answer = sync.finalize, trainer.chain.answer_availability

        def finalize_after_the_answer(run):
            in_finalize.set()
            t_end = time.monotonic() + 30
            while not events(client, tid, "AvailabilityAnswered") and time.monotonic() < t_end:
                time.sleep(0.3)
            return finalize(run)

        def answer_once_the_syncer_finalizes(*args, **kw):
            in_finalize.wait(12)  # well inside the 20-s answer window
            return answer(*args, **kw)

        sync.finalize, trainer.chain.answer_availability = finalize_after_the_answer, answer_once_the_syncer_finalizes
    runner.start("syncer", sync)
    runner.start("forced", trainer)
    runner.start("other", trainer_daemon(dev, TRAINERS[1], tid, tmp_path / "t1"))
    return tid, client, forced, failed, runner.join(300)


@pytest.mark.slow
def test_an_unfetchable_forced_payload_is_challenged_whole_answered_whole_and_credited_from_the_chain(dev, runner,
                                                                                                    tmp_path):
    tid, client, forced, failed, codes = _withheld_forced_run(dev, runner, tmp_path, quorum=2)
    assert codes == {"syncer": 0, "forced": 0, "other": 0}
    assert len(failed) >= 2 and len(set(failed)) == 1  # fetched again after the answer, in vain
    (ch,) = events(client, tid, "AvailabilityChallenged")
    assert ch["args"]["trainer"] == forced and int(ch["args"]["chunkIndex"]) == ChunkOpening.WHOLE_PAYLOAD
    (ans,) = events(client, tid, "AvailabilityAnswered")
    assert ans["args"]["trainer"] == forced and len(ans["args"]["chunk"]) % 64 == 0 and len(ans["args"]["chunk"]) > 64
    run = client.get_run(tid)
    assert run.status == RunStatus.SEALED and events(client, tid, "RoundProvenWrong") == []
    assert events(client, tid, "TrainerSlashed") == []
    i = client.trainers_of(tid).index(forced)
    committed = committed_rounds(client, tid, client.deployment.deploy_block, 1)[0]
    assert int(committed["acceptedBitmaps"][i]) >> int(ch["args"]["fragment"]) & 1  # the challenged fragment is credited

    # a watcher whose node cannot fetch the CID either checks the round from the on-chain answer
    watcher_ipfs, unserved = dev.ipfs(), []
    cat = watcher_ipfs.cat

    def cat_unserved(cid, **kw):  # the CID the syncer could never fetch (trainer 0's other payload is served)
        if cid == failed[0]:
            unserved.append(cid)
            raise IpfsNotFound(cid, "injected: no node serves it")
        return cat(cid, **kw)

    watcher_ipfs.cat = cat_unserved
    checker = RootRoundChecker.for_run(client, watcher_ipfs, tid, run, client.run_start_block(run))
    res = checker.check(0, committed)
    assert res.ok, res.detail
    assert set(unserved) == {failed[0]}


@pytest.mark.slow
def test_a_withheld_non_finite_payload_answered_whole_is_proven_invalid_from_the_chain(dev, runner, tmp_path):
    """The attack turned the other way: a trainer forces NaN payloads, withholds one of them from
    every node and answers the syncer's whole-payload challenge with its NaN bytes. Before, the
    syncer found the answer unusable and left the submission live, so leaving it out was an
    omission anyone could prove and taking it in poisoned the model; now it opens a non-finite
    chunk of the answered vector and proves it invalid (``proveInvalid`` NonFinite): both of the
    trainer's submissions are rejected and slashed, nothing is proven against the syncer, the run seals.

    The answer lands while the syncer finalizes (its finalize waits for it), as the official CI
    once timed it by chance: a syncer that commits after a collect which saw the challenge pending
    leaves the answered NaN submission out of a round that no longer waits for it, an omission
    anyone proves. The syncer commits only after a collect that began with no challenge pending."""
    tid, client, liar, failed, codes = _withheld_forced_run(dev, runner, tmp_path, quorum=1, answer_mid_finalize=True,
                                                            fault={"kind": "nan"})
    assert (codes["syncer"], codes["other"]) == (0, 0), codes
    assert len(set(failed)) == 1
    (ch,) = events(client, tid, "AvailabilityChallenged")
    assert ch["args"]["trainer"] == liar and int(ch["args"]["chunkIndex"]) == ChunkOpening.WHOLE_PAYLOAD
    (ans,) = events(client, tid, "AvailabilityAnswered")
    assert len(ans["args"]["chunk"]) > 64  # answered whole: the NaN bytes are public
    proven = events(client, tid, "InvalidProven")
    assert sorted((int(e["args"]["fragment"]), int(e["args"]["reason"])) for e in proven) == [
        (0, SlashReason.NON_FINITE), (1, SlashReason.NON_FINITE)]
    assert {e["args"]["trainer"] for e in proven} == {liar}
    assert client.submissions_of(tid, 0, liar)[1] == 0b11  # both rejected: leaving them out is no omission
    run = client.get_run(tid)
    assert run.status == RunStatus.SEALED and events(client, tid, "RoundProvenWrong") == []
    committed = committed_rounds(client, tid, client.deployment.deploy_block, 1)[0]
    assert int(committed["acceptedBitmaps"][client.trainers_of(tid).index(liar)]) == 0


@pytest.mark.slow
def test_a_syncer_that_cannot_pay_the_bond_holds_the_commit_until_it_can(dev, runner, tmp_path):
    """The demand turned against the syncer: its pool stake took all its TNZO, so the
    whole-payload challenge's bond cannot be paid. Before, the refused transfer counted as a failed
    step, and five in a row halted the daemon (the run then replaced it and burned its bond);
    committing without the challenge would have omitted a live submission. Now nothing is sent
    (`InsufficientTokens` before the approve), the error says what to fund, and the round's commit
    waits for the report: once the wallet is funded the challenge goes out, is answered whole, the
    payload is credited and nobody is slashed."""
    tid = post_small_task(dev, trainers=2, quorum=2, fragments=2, rounds=1, grace_window_ms=30_000,
                          challenge_window_ms=20_000)
    client = dev.client()
    forced = dev.client(TRAINERS[0]).address
    sync = syncer_daemon(dev, tid, tmp_path / "syncer", evaluate=False, fetch_retries=1, straggler_wait_s=30.0)
    fail_first_fetch(sync, client, tid, forced, always=True)
    refused = threading.Event()
    challenge = sync.chain.challenge_availability

    def challenge_noting_refusals(*args, **kw):
        try:
            return challenge(*args, **kw)
        except InsufficientTokens:
            refused.set()
            raise

    sync.chain.challenge_availability = challenge_noting_refusals
    sync.ensure_registered()  # its pool stake first, then an empty wallet
    wallet, deployer = dev.client(SYNCER), dev.client(0)
    spare = wallet.token_balance()
    wallet.transfer_tokens(deployer.address, spare)
    try:
        runner.start("syncer", sync)
        runner.start("forced", trainer_daemon(dev, TRAINERS[0], tid, tmp_path / "t0", force_onchain=True,
                                              publish_pubsub=False))
        runner.start("other", trainer_daemon(dev, TRAINERS[1], tid, tmp_path / "t1"))
        assert refused.wait(120), "the syncer never tried to challenge"
        time.sleep(3)  # a few more polls with the report outstanding: no commit, no halt
        assert events(client, tid, "RoundCommitted") == [] and events(client, tid, "AvailabilityChallenged") == []
        deployer.mint(wallet.address, client.challenge_bond(tid))  # exactly one bond
        codes = runner.join(300)
    finally:  # the devnet's syncer account serves the module's other tests
        deployer.transfer_tokens(wallet.address, spare)
    assert codes == {"syncer": 0, "forced": 0, "other": 0}
    (ch,) = events(client, tid, "AvailabilityChallenged")
    assert ch["args"]["challenger"] == wallet.address and int(ch["args"]["chunkIndex"]) == ChunkOpening.WHOLE_PAYLOAD
    assert len(events(client, tid, "AvailabilityAnswered")) == 1
    assert client.get_run(tid).status == RunStatus.SEALED
    assert events(client, tid, "TrainerSlashed") == [] and events(client, tid, "RoundProvenWrong") == []
    committed = committed_rounds(client, tid, client.deployment.deploy_block, 1)[0]
    assert int(committed["acceptedBitmaps"][client.trainers_of(tid).index(forced)]) == 0b11


@pytest.mark.slow
def test_a_payload_withheld_from_every_node_and_never_answered_lapses_and_the_round_commits(dev, runner, tmp_path):
    """Issue #23 attack 5 with nothing given: trainer 0 forces both payloads on-chain, puts their
    bytes on no IPFS node (``withhold``: the CIDs are computed, not added) and answers no challenge.
    The syncer demands each whole; nobody answers, so the registry holds the round's commit. Before,
    no daemon expired a lapsed challenge during a round (only the v1 seal did): the syncer waited
    until it was replaced, and its bond burned. Now it expires them once their window has passed:
    trainer 0 is slashed for each (reason Unavailable, the bounty to the syncer), the round commits
    without it, nothing is proven against the syncer, the run seals."""
    tid, client, liar, _, codes = _withheld_forced_run(dev, runner, tmp_path, quorum=1, fault={"kind": "withhold"})
    assert (codes["syncer"], codes["other"]) == (0, 0), codes
    demanded = events(client, tid, "AvailabilityChallenged")
    assert sorted(int(e["args"]["fragment"]) for e in demanded) == [0, 1]
    assert all(e["args"]["trainer"] == liar and int(e["args"]["chunkIndex"]) == ChunkOpening.WHOLE_PAYLOAD
               for e in demanded)
    assert events(client, tid, "AvailabilityAnswered") == []
    lapsed = events(client, tid, "InvalidProven")
    assert sorted((int(e["args"]["fragment"]), int(e["args"]["reason"])) for e in lapsed) == [
        (0, SlashReason.UNAVAILABLE), (1, SlashReason.UNAVAILABLE)]
    assert {e["args"]["prover"] for e in lapsed} == {dev.client(SYNCER).address}
    run = client.get_run(tid)
    assert run.status == RunStatus.SEALED and events(client, tid, "RoundProvenWrong") == []
    committed = committed_rounds(client, tid, client.deployment.deploy_block, 1)[0]
    assert int(committed["acceptedBitmaps"][client.trainers_of(tid).index(liar)]) == 0
