"""Credit for work only on a real devnet (issue #26): a run whose spec sets ``metadata.protocol.credit``
gates every off-chain payload through the syncer's credit gate (`tenzro_operator.roles.syncer_credit`).
A trainer that replays its first round's pseudo-gradient in every later round (no work since; each
payload has its own bytes, so no duplicate check catches it, and every payload check and the norm
screen pass) is credited for its first round only: each replay is left out as ``NearCopy`` (|cosine|
1 to its own earlier payload, or to the last aggregate that held it) and earns nothing; the
transcripts name the check with the figures; the syncer's state file keeps the gate's
history for a restart; tokens are conserved."""

from __future__ import annotations

import pytest
import torch

from roles_stack import TRAINERS, accepted_counts, assert_tokens_conserved, events, post_small_task, syncer_daemon, \
    trainer_daemon
from tenzro_operator.chain import RunStatus
from tenzro_operator.daemon import load_state_file
from tenzro_operator.transcript import RoundTranscript

pytestmark = pytest.mark.timeout(400)

ROUNDS = 3


@pytest.mark.slow
def test_a_trainer_replaying_its_first_update_is_credited_for_that_round_only(dev, runner, tmp_path):
    tid = post_small_task(dev, trainers=3, quorum=1, fragments=2, rounds=ROUNDS, credit={}, score_min=0.0)
    runner.start("syncer", syncer_daemon(dev, tid, tmp_path / "syncer", evaluate=False, straggler_wait_s=60.0))
    runner.start("honest0", trainer_daemon(dev, TRAINERS[0], tid, tmp_path / "t0"))
    runner.start("honest1", trainer_daemon(dev, TRAINERS[1], tid, tmp_path / "t1"))
    runner.start("stale", trainer_daemon(dev, TRAINERS[2], tid, tmp_path / "t2", fault={"kind": "stale"}))
    assert runner.join(360) == {"syncer": 0, "honest0": 0, "honest1": 0, "stale": 0}
    client, ipfs = dev.client(), dev.ipfs()
    assert client.get_run(tid).status == RunStatus.SEALED
    stale = dev.client(TRAINERS[2]).address.lower()

    accepted, rejected = {}, {}  # (round, trainer) -> fragments / [(fragment, reason, detail)]
    for ev in events(client, tid, "RoundCommitted"):
        a = ev["args"]
        tr = RoundTranscript.parse(ipfs.cat(a["transcriptCid"]), bytes(a["transcriptHash"]))
        for fr in tr.fragments:
            for x in fr.accepted:
                accepted.setdefault((tr.round, x.trainer.lower()), []).append(fr.fragment)
            for x in fr.rejected:
                rejected.setdefault((tr.round, x.trainer.lower()), []).append((fr.fragment, x.reason, x.detail))
    replays = [x for r in range(1, ROUNDS) for x in rejected.get((r, stale), [])]
    assert len(replays) == 2 * (ROUNDS - 1), rejected  # every replay was delivered, valid, and left out
    assert all(reason == "NearCopy" and "|cosine|" in detail and "moving average of passes" in detail
               for _, reason, detail in replays), replays
    assert not any(accepted.get((r, stale)) for r in range(1, ROUNDS))
    assert not events(client, tid, "GradientSubmitted")  # nothing was forced: a named rejection is accepted
    credits = accepted_counts(client, tid)
    assert credits.get(dev.client(TRAINERS[2]).address, 0) == len(accepted.get((0, stale), []))
    assert_tokens_conserved(client, tid, 3)

    # the state file carries the history a restarted syncer continues from
    saved = load_state_file(tmp_path / "syncer" / f"syncer-{tid.hex()}.pt")
    history = saved["credit"]["history"]
    index = {a.lower(): i for i, a in enumerate(client.trainers_of(tid))}
    assert {i for i, _ in history["average"]} == {0, 1, 2}
    assert all(len(v) == ROUNDS for v in history["earlier"].values())
    assert max(a for (i, _), a in history["average"].items() if i == index[stale]) < 0.6
    assert all(isinstance(t, torch.Tensor) for agg in saved["credit"]["last_aggregate"].values() for t in agg.values())
