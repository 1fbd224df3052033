"""The daemons in the root flow (contracts/PROTOCOL.md §5, `tenzro_operator.root_flow`) on a real
devnet and IPFS node: trainers deliver signed submissions over pubsub in a commit and a reveal
phase, the syncer commits each round by root, the run seals after the last challenge window and
every trainer claims its reward with a Merkle proof. A copycat enrolled beside them, which re-signs
every honest reveal it sees as its own (attack 6 of the Protocol v2 issue), is never credited."""

from __future__ import annotations

import threading

import pytest
import torch

from roles_stack import TRAINERS, events, post_small_task, syncer_daemon, trainer_daemon
from run_view_checks import assert_views_tell_the_truth
from stack import TOKEN, wait_until
from tenzro_operator import replay
from tenzro_operator.chain import RunStatus
from tenzro_operator.cli.forecast import ForecastError, export_model
from tenzro_operator.credits import credit_halves, paid_credits
from tenzro_operator.ipfs.pubsub import submission_topic
from tenzro_operator.roles.trainer import FaultSettings
from tenzro_operator.root_flow import (CommitMessage, RevealMessage, committed_round, committed_rounds, committed_weights,
                                      cumulative_credits, parse_message)
from tenzro_operator.task_assets import fetch_spec, fetch_weights
from tenzro_operator.task_runtime import TaskRuntime
from tenzro_operator.transcript import RoundTranscript
from tenzro_operator.views import run as run_view
from tenzro_trainer import round_commitment as rc
from tenzro_trainer.model_dir import load_model_dir

pytestmark = pytest.mark.timeout(400)


def _keyed_watcher(net, tid: bytes, data_dir):
    """A watcher of run ``tid`` signing as anvil account 9 (it sends the fraud proofs)."""
    from tenzro_operator.config import WatcherConfig
    from tenzro_operator.keys import anvil_account
    from tenzro_operator.roles.watcher import WatcherDaemon

    cfg = WatcherConfig(node_rpc=net.rpc_url, ipfs_api=net.ipfs_url, deployments=net.deployments,
                        task_id="0x" + tid.hex(), data_dir=data_dir, metrics_port=None, poll_interval_s=0.3)
    return WatcherDaemon(cfg, anvil_account(9), net.client(9), net.ipfs())


def _start_stand_in(net, runner, tid: bytes, liar: str, data_dir) -> None:
    """Once syncer ``liar`` is elected (the only candidate), start stand-in syncer B (anvil 8)."""
    wait_until(lambda: net.client().get_run(tid).syncer == liar, 120, "syncer A elected")
    runner.start("B", syncer_daemon(net, tid, data_dir, account=8, evaluate=False, straggler_wait_s=30.0))


def _run_with_a_faulty_syncer(net, tmp_path, fault: dict, prepare=None, **task) -> tuple:
    """A 3-trainer, 2-fragment, 2-round root-flow run (20 s challenge windows; a 28 s grace window,
    so 14 s commit and reveal phases: round 0's commit phase must outlast every daemon's start on a
    loaded CI host, where 8 s left trainers out of it) served by syncer A
    (one bond of stake) with ``fault``, three honest trainers, a keyed watcher and stand-in
    syncer B, until every daemon is done; ``task``: more spec fields; ``prepare(k, daemon)``:
    called on trainer k's daemon before it starts. Returns (task id, A's address, the watcher,
    the daemons' results, the `Runner`)."""
    from roles_stack import SYNCER, Runner

    runner = Runner()
    try:
        tid = post_small_task(net, trainers=3, quorum=2, fragments=2, rounds=2, grace_window_ms=28_000,
                              challenge_window_ms=20_000, **task)
        liar = net.client(SYNCER).address
        runner.start("A", syncer_daemon(net, tid, tmp_path / "A", evaluate=False, straggler_wait_s=30.0,
                                        register_stake="10", fault=fault))
        for k in range(3):
            daemon = trainer_daemon(net, TRAINERS[k], tid, tmp_path / f"t{k}")
            if prepare is not None:
                prepare(k, daemon)
            runner.start(f"t{k}", daemon)
        watcher = _keyed_watcher(net, tid, tmp_path / "w")
        runner.start("watcher", watcher)
        _start_stand_in(net, runner, tid, liar, tmp_path / "B")
        return tid, liar, watcher, runner.join(420), runner
    finally:
        runner.stop_all()


def _forcing(fault: str, *ks: int):
    """A ``prepare`` for `_run_with_a_faulty_syncer`: trainers ``ks`` deliver on-chain too from
    round 0 (``force_onchain``) and misbehave as trainer fault ``fault`` says."""
    def prepare(k, daemon):
        if k in ks:
            daemon.config.force_onchain = True
            daemon.fault = FaultSettings(kind=fault)

    return prepare


def _sealed_run(client, tid: bytes, results: dict):
    """The run ``tid``, checked sealed, after every daemon of ``results`` exited with 0."""
    assert set(results.values()) == {0}, results
    run = client.get_run(tid)
    assert run.status == RunStatus.SEALED
    return run


def _copycat(dev, tid: bytes, index: int, stop: threading.Event) -> list:
    """An enrolled trainer that trains nothing: it listens on the submission topic and, for every
    honest reveal, publishes a commitment to the same payload signed as its own and then that
    reveal. Returns (in the list it fills) the reveals it sent."""
    me, ipfs, sent = dev.client(index), dev.ipfs(), []
    topic = submission_topic(tid)

    def loop():
        with ipfs.pubsub_subscribe(topic) as sub:
            while not stop.is_set():
                msg = sub.get(timeout_s=0.5)
                if msg is None:
                    continue
                m = parse_message(msg.data)
                if not isinstance(m, RevealMessage) or m.trainer == me.address.lower():
                    continue
                signed = me.sign_outer_gradient(tid, m.round, m.fragment, m.signed_payload(),
                                                base_root=bytes.fromhex(m.base_root[2:]))
                mine = RevealMessage.of(tid, m.round, m.fragment, me.address, bytes.fromhex(m.base_root[2:]), signed)
                ipfs.pubsub_publish(topic, CommitMessage.signed(me.account, me.chain_id, me.registry.address,
                                                                mine).encode())
                ipfs.pubsub_publish(topic, mine.encode())
                sent.append(mine)

    threading.Thread(target=loop, name="copycat", daemon=True).start()
    return sent


@pytest.mark.slow
def test_an_honest_root_flow_run_commits_by_root_seals_and_pays_every_trainer(dev, runner, tmp_path):
    tid = post_small_task(dev, trainers=4, quorum=2, fragments=2, rounds=2, grace_window_ms=16_000,
                          challenge_window_ms=4_000)
    client = dev.client()
    assert client.is_root_flow(tid)
    copier = dev.client(TRAINERS[3])
    copier.enroll_trainer(tid, 100 * TOKEN, f"did:tenzro:machine:{copier.address}")
    stop = threading.Event()
    copies = _copycat(dev, tid, TRAINERS[3], stop)
    runner.start("syncer", syncer_daemon(dev, tid, tmp_path / "syncer", straggler_wait_s=30.0, evaluate=False))
    for k in range(3):
        runner.start(f"t{k}", trainer_daemon(dev, TRAINERS[k], tid, tmp_path / f"t{k}"))
    results = runner.join(360)
    stop.set()
    assert results == {"syncer": 0, "t0": 0, "t1": 0, "t2": 0}, results
    run = client.get_run(tid)
    assert run.status == RunStatus.SEALED

    # one commitRound per round, every honest trainer accepted on both fragments, the copycat on
    # none (its commitments came after the commit phase, when the payloads were first public), no
    # v1 traffic at all
    assert len(copies) >= 4
    rounds = committed_rounds(client, tid, client.deployment.deploy_block, 2)
    assert sorted(rounds) == [0, 1]
    trainers = [a.lower() for a in client.trainers_of(tid)]
    cat = trainers.index(copier.address.lower())
    want = [0 if i == cat else 3 for i in range(4)]
    assert [list(rounds[r]["acceptedBitmaps"]) for r in (0, 1)] == [want, want]
    assert events(client, tid, "GradientSubmitted") == []  # every submission went off-chain

    # the transcript carries what a fraud proof needs: each signed struct, the momentum
    ipfs = dev.ipfs()
    a = rounds[1]
    tr = RoundTranscript.parse(ipfs.cat(a["transcriptCid"]), bytes(a["transcriptHash"]))
    for fr in tr.fragments:
        assert fr.momentum is not None and len(fr.accepted) == 3
        for s in fr.accepted:
            g = rc.OuterGradient(tid, 1, fr.fragment, bytes.fromhex(s.base_root[2:]),
                                 bytes.fromhex(s.payload_root[2:]), s.payload_sumsq, s.cid, bytes.fromhex(s.sha256[2:]))
            assert s.trainer in trainers and len(s.signature) == 132 and len(g.struct_hash()) == 32

    # claims: every trainer claimed its pro-rata share of what the seal left claimable
    credits = cumulative_credits(rounds, run.fragment_sizes, 4)
    assert rc.credits_tree(credits).root == client.root_state(tid)[2] and credits[cat] == 0
    claims = {e["args"]["trainer"].lower(): e["args"]["reward"] for e in events(client, tid, "RewardClaimed")}
    assert sorted(claims) == sorted(t for i, t in enumerate(trainers) if i != cat)
    claimable = events(client, tid, "RootRunSealed")[0]["args"]["claimable"]
    for i, t in enumerate(trainers):
        assert claims.get(t, 0) == claimable * credits[i] // sum(credits)
    # tokens conserved: the pool went to the syncer's fees and the claims, less the rounding dust
    # (under one atto per trainer, swept back to the sponsor later); every stake came back whole
    assert claimable + run.syncer_fees_accrued == run.reward_pool
    assert 0 <= claimable - sum(claims.values()) < 3
    for idx in TRAINERS[:4]:
        st = client.trainer_stats(tid, dev.client(idx).address)
        assert st.slashed == 0
    refunds = sum(e["args"]["stakeRefund"] for e in events(client, tid, "PayoutCredited"))
    assert refunds == 4 * 100 * TOKEN

    # a dApp's checks: the receipt verifies by replay of the committed rounds, the model exports
    report = replay.verify_receipt(client, ipfs, tid)
    assert report.ok and report.verifier_ok and report.payloads_checked == 12, str(report)
    cfg = export_model(client, ipfs, tid, tmp_path / "model")
    assert (tmp_path / "model" / "model.safetensors").exists() and cfg
    # and as the average of both rounds' weights, each checked against its committed weights root
    avg = export_model(client, ipfs, tid, tmp_path / "avg", average_last=2)
    ev = [committed_round(client, tid, client.run_start_block(run), r) for r in (1, 0)]
    assert avg["provenance"]["averaged_rounds"] == {
        "rounds": [1, 0], "weights_roots": [cfg["provenance"]["final_model_hash"], "0x" + bytes(ev[1]["weightsRoot"]).hex()]}
    rt = TaskRuntime.from_spec(fetch_spec(ipfs, run.spec_cid, run.spec_hash))
    w1, w0 = (fetch_weights(ipfs, rt, *committed_weights(ipfs, e))[0] for e in ev)
    got = load_model_dir(tmp_path / "avg")[0].state_dict()
    assert all(torch.equal(got[k], ((w1[k].double() + w0[k].double()) / 2).float()) for k in w1)
    assert not all(torch.equal(w1[k], w0[k]) for k in w1)  # two different rounds were averaged
    with pytest.raises(ForecastError, match="cannot average the last 3 rounds"):
        export_model(client, ipfs, tid, tmp_path / "avg3", average_last=3)
    # get-run, trainer-stats, the explorer and the gateway show what these events say (issue #27)
    assert_views_tell_the_truth(client, ipfs, dev.rpc_url, dev.ipfs_url, dev.deployments, tid)


@pytest.mark.slow
def test_a_restarted_root_flow_syncer_rebuilds_its_rounds_from_the_transcripts(dev, runner, tmp_path, caplog):
    """Syncer A commits round 0 and exits; its state file is deleted; syncer B rebuilds round 0
    from the RoundCommitted transcript (weights checked against the committed weights root),
    commits round 1 over the same trainers' reveals and seals; the trainers claim."""
    import logging

    tid = post_small_task(dev, trainers=2, quorum=2, fragments=2, rounds=2, grace_window_ms=16_000,
                          challenge_window_ms=4_000)
    sdir = tmp_path / "syncer"
    for k in range(2):
        runner.start(f"t{k}", trainer_daemon(dev, TRAINERS[k], tid, tmp_path / f"t{k}"))
    assert syncer_daemon(dev, tid, sdir, evaluate=False, straggler_wait_s=30.0, exit_after_rounds=1).run() == 0
    for f in sdir.glob("syncer-*.pt"):
        f.unlink()
    caplog.set_level(logging.INFO, logger="tenzro.syncer")
    b = syncer_daemon(dev, tid, sdir, evaluate=False, straggler_wait_s=30.0)
    assert b.run() == 0
    assert "rebuilt round 0 from its transcript" in caplog.text
    assert [h["round"] for h in b.history] == [1] and b.history[0]["accepted"] == 4
    assert runner.join(120) == {"t0": 0, "t1": 0}
    client = dev.client()
    assert client.get_run(tid).status == RunStatus.SEALED
    assert len(events(client, tid, "RewardClaimed")) == 2


@pytest.mark.slow
def test_a_watcher_proves_a_lying_syncer_wrong_and_the_run_seals_under_a_new_one(tmp_path):
    """Syncer A (one bond of stake) commits round 0 with one wrong weight (fault
    ``wrong_aggregate_at``); a watcher with a key recomputes the round from its committed inputs
    and sends ``proveAggregate`` at once: A loses its bond (10 % to the watcher, the rest burned)
    and its fee for the round, the run goes back to round 0, stand-in syncer B is elected, the
    trainers train round 0 again, and the run seals with every honest party whole."""
    from roles_stack import devnet_stack
    from tenzro_operator.keys import anvil_account

    with devnet_stack(tmp_path / "net") as net:
        tid, liar, watcher, results, _ = _run_with_a_faulty_syncer(net, tmp_path, {"wrong_aggregate_at": [0, 1]})
        client = net.client()
        assert results == {"A": 0, "t0": 0, "t1": 0, "t2": 0, "watcher": 0, "B": 0}, results
        run = client.get_run(tid)
        assert run.status == RunStatus.SEALED
        bond = run.syncer_bond
        (proof,) = events(client, tid, "RoundProvenWrong")
        p = proof["args"]
        assert (p["round"], p["fragment"], p["syncer"], p["slashed"], p["bounty"]) == (0, 1, liar, bond, bond // 10)
        assert watcher.proofs == [(tid, 0, bond // 10)]
        assert client.withdrawable(anvil_account(9).address) == bond // 10
        assert client.syncer_info(liar).stake == 0
        # round 0 committed twice (A's lie, then B), round 1 once; the final rounds credit everyone
        commits = events(client, tid, "RoundCommitted")
        assert [int(c["args"]["round"]) for c in commits] == [0, 0, 1]
        senders = [client.w3.eth.get_transaction(c["tx_hash"])["from"] for c in commits]
        assert senders == [liar, net.client(8).address, net.client(8).address]
        rounds = committed_rounds(client, tid, client.deployment.deploy_block, 2)
        assert [list(rounds[r]["acceptedBitmaps"]) for r in (0, 1)] == [[3, 3, 3], [3, 3, 3]]
        assert [ok for _, _, ok in watcher.checked] == [False, True, True]
        # nobody honest lost anything: stakes back, claims pro-rata, A's fee for the discarded round
        # back in the pool
        for idx in TRAINERS[:3]:
            assert client.trainer_stats(tid, net.client(idx).address).slashed == 0
        claimable = events(client, tid, "RootRunSealed")[0]["args"]["claimable"]
        assert claimable + run.syncer_fees_accrued == run.reward_pool
        assert client.syncer_fee_of(tid, liar) == 0
        assert len(events(client, tid, "RewardClaimed")) == 3
        # the receipt holds the rounds as committed again, and verifies by replay
        report = replay.verify_receipt(client, net.ipfs(), tid)
        assert report.ok and report.verifier_ok, str(report)
        # every view shows the rounds as committed again, and round 0 the proof against A's commit
        assert_views_tell_the_truth(client, net.ipfs(), net.rpc_url, net.ipfs_url, net.deployments, tid)
        r0 = run_view.build(client, tid, trainers=False).round(0)
        assert r0.status == "committed" and [w["kind_name"] for w in r0.proven_wrong] == ["aggregate"]
        assert [c["tx"] for c in r0.discarded_commits] == [commits[0]["tx_hash"]] and r0.tx == commits[1]["tx_hash"]


@pytest.mark.slow
def test_a_syncer_gone_silent_mid_round_is_replaced_and_the_stand_in_commits_the_round_with_every_submission(tmp_path):
    """Syncer A commits round 0, then goes silent in round 1 (fault ``go_silent_at``: what a cut
    host looks like from the chain) after the trainers have committed and revealed their
    submissions to the topic. Once ``syncerReplaceableAt`` passes, stand-in B is elected (A's bond
    burned) and commits round 1 itself with every trainer's submissions: the delivery made while A
    was the syncer is not lost, no trainer trains the round again or is slashed, and the run seals
    with a receipt that verifies by replay (issue 25)."""
    from roles_stack import devnet_stack

    with devnet_stack(tmp_path / "net") as net:
        tid, silent, watcher, results, runner = _run_with_a_faulty_syncer(net, tmp_path, {"go_silent_at": 1})
        client = net.client()
        run = _sealed_run(client, tid, results)
        elected = [e["args"] for e in events(client, tid, "SyncerElected")]
        b = net.client(8).address
        assert [(e["syncer"], e["previous"]) for e in elected] == [(silent, "0x" + "0" * 40), (b, silent)]
        assert elected[1]["previousSlashed"] == run.syncer_bond > 0
        commits = events(client, tid, "RoundCommitted")
        assert [int(c["args"]["round"]) for c in commits] == [0, 1]
        assert [client.w3.eth.get_transaction(c["tx_hash"])["from"] for c in commits] == [silent, b]
        rounds = committed_rounds(client, tid, client.deployment.deploy_block, 2)
        assert [list(rounds[r]["acceptedBitmaps"]) for r in (0, 1)] == [[3, 3, 3], [3, 3, 3]]
        # round 1 opened once: the stand-in committed what the trainers had delivered under A
        assert [int(e["args"]["round"]) for e in events(client, tid, "RoundOpened")] == [0, 1]
        for idx in TRAINERS[:3]:
            assert client.trainer_stats(tid, net.client(idx).address).slashed == 0
        assert replay.verify_receipt(client, net.ipfs(), tid).ok
        assert [ok for _, _, ok in watcher.checked] == [True, True]


@pytest.mark.slow
def test_a_censored_trainer_forces_its_submissions_and_a_watcher_proves_the_omission(tmp_path):
    """Syncer A censors the trainer at index 1 (fault ``censor_trainer``). Round 0: A leaves its
    off-chain submissions out, which nothing on-chain shows; the trainer reads the commit, finds
    them neither credited nor rejected, and from round 1 on commits and reveals each submission
    on-chain too (the forced path). Round 1: A leaves those out as well; the watcher proves the
    omission (``proveOmission``): A loses its bond, round 1 reopens, stand-in B commits it with
    the censored trainer credited (forced again in the new opening), and the run seals. The
    censored trainer lost round 0 only."""
    from roles_stack import devnet_stack

    with devnet_stack(tmp_path / "net") as net:
        tid, liar, watcher, results, runner = _run_with_a_faulty_syncer(net, tmp_path, {"censor_trainer": 1})
        client = net.client()
        run = _sealed_run(client, tid, results)
        victim = client.trainers_of(tid)[1]
        daemon = next(d for k, d in runner.daemons.items() if k.startswith("t") and d.account.address == victim)
        # both fragments of round 1 on-chain, in each of its two openings (A's, then B's after the proof)
        assert daemon.forced and daemon.summary["forced"] == 4
        forced = [e["args"] for e in events(client, tid, "GradientSubmitted")]
        assert sorted((int(a["round"]), int(a["fragment"])) for a in forced) == [(1, 0), (1, 0), (1, 1), (1, 1)]
        assert {a["trainer"] for a in forced} == {victim}
        (proof,) = events(client, tid, "RoundProvenWrong")
        p = proof["args"]
        assert (p["round"], p["kind"], p["position"], p["syncer"]) == (1, 3, 1, liar)  # kind 3: omission
        assert watcher.proofs == [(tid, 1, run.syncer_bond // 10)]
        assert client.syncer_info(liar).stake == 0
        rounds = committed_rounds(client, tid, client.deployment.deploy_block, 2)
        assert [list(rounds[r]["acceptedBitmaps"]) for r in (0, 1)] == [[3, 0, 3], [3, 3, 3]]
        claims = {e["args"]["trainer"]: e["args"]["reward"] for e in events(client, tid, "RewardClaimed")}
        assert len(claims) == 3 and 0 < claims[victim] < min(v for t, v in claims.items() if t != victim)
        for idx in TRAINERS[:3]:
            assert client.trainer_stats(tid, net.client(idx).address).slashed == 0
        assert replay.verify_receipt(client, net.ipfs(), tid).ok


@pytest.mark.slow
def test_a_false_loss_increase_is_rescored_by_its_trainer_which_forces_its_way_in(tmp_path):
    """Syncer A rejects every off-chain submission of the trainer at index 1 as ``LossIncrease``
    (fault ``false_loss_increase``) in a run with scoring (``score_min: 0``), which nothing
    on-chain can show. After round 0 the trainer scores its own payloads as the syncer must have,
    finds them above ``score_min`` and delivers on-chain too from round 1 on, where no score
    leaves a submission out: A has to accept them. Its lie then withholds only its endorsement
    (PROTOCOL.md §5 "Endorsed credit"): the victim's work is in the model, its unendorsed credit
    paid only up to its endorsed (none here: THREATS.md's residual of a lying syncer). Nobody is
    slashed; the run seals and replays."""
    from roles_stack import devnet_stack

    with devnet_stack(tmp_path / "net") as net:
        tid, liar, _watcher, results, runner = _run_with_a_faulty_syncer(net, tmp_path, {"false_loss_increase": 1},
                                                                        score_min=0.0)
        client = net.client()
        _sealed_run(client, tid, results)
        victim = client.trainers_of(tid)[1]
        daemons = {d.account.address: d for k, d in runner.daemons.items() if k.startswith("t")}
        assert daemons[victim].forced and daemons[victim].summary["forced"] == 2
        assert not any(d.forced for a, d in daemons.items() if a != victim)  # true verdicts are left alone
        rounds = committed_rounds(client, tid, client.deployment.deploy_block, 2)
        assert [int(rounds[r]["acceptedBitmaps"][1]) for r in (0, 1)] == [0, 3]
        assert [int(rounds[r]["unendorsedBitmaps"][1]) for r in (0, 1)] == [0, 3]
        tr = RoundTranscript.parse(net.ipfs().cat(rounds[0]["transcriptCid"]), bytes(rounds[0]["transcriptHash"]))
        assert sorted((fr.fragment, x.reason) for fr in tr.fragments for x in fr.rejected
                      if x.trainer.lower() == victim.lower()) == [(0, "LossIncrease"), (1, "LossIncrease")]
        forced = [e["args"] for e in events(client, tid, "GradientSubmitted")]
        assert sorted((int(a["round"]), int(a["fragment"])) for a in forced) == [(1, 0), (1, 1)]
        assert events(client, tid, "RoundProvenWrong") == [] and client.get_run(tid).syncer == liar
        for idx in TRAINERS[:3]:
            assert client.trainer_stats(tid, net.client(idx).address).slashed == 0
        assert replay.verify_receipt(client, net.ipfs(), tid).ok


@pytest.mark.slow
def test_a_payload_delivered_both_ways_cannot_get_an_honest_syncer_convicted(tmp_path):
    """The attack: a trainer sends a sign-flipped payload both off-chain and forced on-chain, so
    that an honest syncer scores the off-chain copy out and, reading the forced copy as its
    duplicate, leaves a live forced submission out: an omission the attacker's own watcher would
    prove for the bounty. The defence: a forced submission replaces the off-chain copy and is
    never scored out, so the honest syncer accepts it and no proof lands; it does not endorse it
    (its score is not above ``score_min``), so the attacker's credit for it pays nothing."""
    from roles_stack import devnet_stack

    with devnet_stack(tmp_path / "net") as net:
        tid, syncer, watcher, results, runner = _run_with_a_faulty_syncer(net, tmp_path, {},
                                                                          prepare=_forcing("sign_flip", 2),
                                                                          score_min=0.0)
        client = net.client()
        run = _sealed_run(client, tid, results)
        assert run.syncer == syncer
        assert events(client, tid, "RoundProvenWrong") == [] and watcher.proofs == []
        assert client.syncer_info(syncer).stake > 0
        me = runner.daemons["t2"].account.address
        forced = [e["args"] for e in events(client, tid, "GradientSubmitted")]
        assert sorted((int(a["round"]), int(a["fragment"])) for a in forced if a["trainer"] == me) == \
            [(0, 0), (0, 1), (1, 0), (1, 1)]
        rounds = committed_rounds(client, tid, client.deployment.deploy_block, 2)
        i = client.trainers_of(tid).index(me)
        assert [int(rounds[r]["acceptedBitmaps"][i]) for r in (0, 1)] == [3, 3]  # forced: credited as the rule says
        assert [int(rounds[r]["unendorsedBitmaps"][i]) for r in (0, 1)] == [3, 3]  # ... and not endorsed
        credits = cumulative_credits(rounds, run.fragment_sizes, run.enrolled_count)
        assert credit_halves(credits[i])[0] == 0 and paid_credits(credits[i]) == 0
        assert all(paid_credits(c) > 0 for j, c in enumerate(credits) if j != i)  # the honest are endorsed
        assert replay.verify_receipt(client, net.ipfs(), tid).ok


@pytest.mark.slow
def test_sybils_forcing_zero_payloads_into_an_open_run_are_paid_nothing(tmp_path):
    """Issue #26's sybil fill with real daemons: two of the three trainers of an Open run train
    nothing and force all-zero payloads on-chain (fault ``zeros``, ``force_onchain``), which the
    registry requires the syncer to accept. The honest syncer accepts them (no proof lands) but,
    as they score 0 <= ``score_min``, does not endorse them (PROTOCOL.md section 5 "Endorsed
    credit"): the sybils claim nothing, the honest trainer is paid its share of the whole total,
    and after the claim period the sponsor sweeps back the sybils' share."""
    from roles_stack import SPONSOR, devnet_stack

    with devnet_stack(tmp_path / "net") as net:
        tid, syncer, watcher, results, _ = _run_with_a_faulty_syncer(net, tmp_path, {}, prepare=_forcing("zeros", 1, 2),
                                                                     score_min=0.0)
        client = net.client()
        run = _sealed_run(client, tid, results)
        assert run.syncer == syncer and events(client, tid, "RoundProvenWrong") == [] and watcher.proofs == []
        rounds = committed_rounds(client, tid, client.deployment.deploy_block, 2)
        trainers = client.trainers_of(tid)
        sybil = [trainers.index(net.client(TRAINERS[k]).address) for k in (1, 2)]
        honest = trainers.index(net.client(TRAINERS[0]).address)
        for r in (0, 1):
            assert [int(rounds[r]["acceptedBitmaps"][i]) for i in sybil] == [3, 3]  # forced in: accepted
            assert [int(rounds[r]["unendorsedBitmaps"][i]) for i in sybil] == [3, 3]  # ... not endorsed
            assert int(rounds[r]["unendorsedBitmaps"][honest]) == 0
        credits = cumulative_credits(rounds, run.fragment_sizes, run.enrolled_count)
        claims = {int(e["args"]["index"]): int(e["args"]["reward"]) for e in events(client, tid, "RewardClaimed")}
        claimable = int(events(client, tid, "RootRunSealed")[0]["args"]["claimable"])
        assert set(claims) == {honest}  # the sybils had nothing to claim
        assert claims[honest] == claimable * paid_credits(credits[honest]) // run.total_credits
        assert 2 * claims[honest] < claimable  # its share of the whole total: the sybils' share is nobody's
        sponsor = net.client(SPONSOR)
        before = sponsor.withdrawable()
        sponsor.mine(seconds=91 * 24 * 3600)  # past the 90-day claim period
        sponsor.sweep(tid)
        # the sybils' share goes back to the sponsor: claims and sweep pay out the claimable exactly
        assert sponsor.withdrawable() - before == claimable - claims[honest]
        assert client.get_run(tid).reward_pool_left == 0


@pytest.mark.slow
def test_every_cheat_of_the_adversarial_scenario_is_caught_and_honest_parties_lose_nothing(tmp_path):
    """The issue's adversarial scenario in one root-flow run with loss-improvement scoring
    (``score_min: 0``), each cheater a separate daemon: syncer A reports an honest submission
    invalid (refused: there is nothing on-chain to slash) and commits one wrong weight (proven by
    the watcher: A loses its bond, stand-in B finishes the run); a copycat re-signs honest reveals
    (never credited); a sign-flipping trainer sends -delta (scored out every time). Every honest
    trainer gets its stake back and a reward; tokens are conserved exactly."""
    from roles_stack import SYNCER, Runner, devnet_stack

    with devnet_stack(tmp_path / "net") as net:
        runner = Runner()
        try:
            tid = post_small_task(net, trainers=5, quorum=2, fragments=2, rounds=2, inner_steps=8,
                                  grace_window_ms=20_000, challenge_window_ms=20_000, score_min=0.0)
            client = net.client()
            liar = net.client(SYNCER).address
            runner.start("A", syncer_daemon(net, tid, tmp_path / "A", evaluate=False, straggler_wait_s=30.0,
                                            register_stake="10", fault={"wrong_aggregate_at": [0, 1],
                                                                        "false_invalid_report": [0, 0, 0]}))
            for k in range(3):
                runner.start(f"t{k}", trainer_daemon(net, TRAINERS[k], tid, tmp_path / f"t{k}"))
            # the honest trainers hold indices 0-2, so the false report (index 0) targets one of them
            wait_until(lambda: client.get_run(tid).enrolled_count == 3, 120, "the honest trainers enrolled")
            runner.start("copycat", trainer_daemon(net, TRAINERS[3], tid, tmp_path / "cc", fault={"kind": "copycat"}))
            runner.start("flipper", trainer_daemon(net, TRAINERS[4], tid, tmp_path / "sf", fault={"kind": "sign_flip"}))
            runner.start("watcher", _keyed_watcher(net, tid, tmp_path / "w"))
            _start_stand_in(net, runner, tid, liar, tmp_path / "B")
            results = runner.join(480)
        finally:
            runner.stop_all()
        run = _sealed_run(client, tid, results)
        trainers = [a.lower() for a in client.trainers_of(tid)]
        idx = {name: trainers.index(net.client(TRAINERS[k]).address.lower())
               for name, k in (("t0", 0), ("t1", 1), ("t2", 2), ("copycat", 3), ("flipper", 4))}
        rounds = committed_rounds(client, tid, client.deployment.deploy_block, 2)
        credits = cumulative_credits(rounds, run.fragment_sizes, 5)
        caught = {
            # the lying syncer: proven wrong, its bond slashed
            "wrong aggregate": [e["args"]["syncer"] for e in events(client, tid, "RoundProvenWrong")] == [liar]
            and client.syncer_info(liar).stake == 0,
            # the false report: made, refused, nobody slashed
            "false invalid report": runner.daemons["A"]._fault_false_reported
            and not events(client, tid, "InvalidProven")
            and not events(client, tid, "TrainerSlashed"),
            "copycat": credits[idx["copycat"]] == 0,
            "sign flip": credits[idx["flipper"]] == 0,
        }
        assert all(caught.values()), caught
        # the flipper's payloads were scored out, in the transcripts for all to see
        for r in (0, 1):
            tr = RoundTranscript.parse(net.ipfs().cat(rounds[r]["transcriptCid"]), bytes(rounds[r]["transcriptHash"]))
            reasons = {(fr.fragment, x.trainer): x.reason for fr in tr.fragments for x in fr.rejected}
            assert {reasons.get((f, trainers[idx["flipper"]])) for f in (0, 1)} == {"LossIncrease"}, reasons
        # honest parties whole: stakes back to all five (nobody was slashed), the honest trainers paid
        claims = {e["args"]["trainer"].lower(): e["args"]["reward"] for e in events(client, tid, "RewardClaimed")}
        for name in ("t0", "t1", "t2"):
            assert claims.get(trainers[idx[name]], 0) > 0, (name, claims)
        refunds = sum(e["args"]["stakeRefund"] for e in events(client, tid, "PayoutCredited"))
        assert refunds == 5 * 100 * TOKEN
        claimable = events(client, tid, "RootRunSealed")[0]["args"]["claimable"]
        assert claimable + run.syncer_fees_accrued == run.reward_pool
        assert 0 <= claimable - sum(claims.values()) < 5
        assert replay.verify_receipt(client, net.ipfs(), tid).ok
