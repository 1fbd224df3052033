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
from roles_stack import TRAINERS, events, fail_first_fetch, post_small_task, syncer_daemon, trainer_daemon
from tenzro_operator.chain import ChunkOpening, RunStatus, SlashReason
from tenzro_operator.errors import IpfsNotFound
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
                          challenge_window_ms=20_000, flow="root")
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
