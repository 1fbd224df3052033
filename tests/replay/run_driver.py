"""A second, independent implementation of a whole run on the devnet, for the replay tests.

No daemon: this module plays every role of the protocol directly with the library pieces, in
one process, so the tests get a sealed run without waiting for (or trusting) the trainer and
syncer daemons, and later can cross-check the daemons' rounds against it.

1. the contracts come from `stack.deploy_stack` (ape's build artifacts through web3, in the
   shape of ``deployments/<network>.json``); `fund` mints TNZO to the role accounts.
2. `play_run`: the sponsor builds and posts a spec (`roles.sponsor`); the syncer registers; the
   trainers enroll (the M-th opens round 0); the syncer is elected (request, then elect); for
   each round every trainer runs H inner AdamW steps (`InnerTrainer`) on its shard, and per
   fragment pins ``pseudo_gradient`` as safetensors and submits it (EIP-712 signed); the
   syncer fetches each payload from IPFS, checks it, aggregates with the spec's rule (inputs
   keyed by lower-case trainer address), applies the outer Nesterov step, pins the new weights
   (`TaskRuntime.encode_weights`) and the `RoundTranscript`, and calls ``finalizeRound``;
   finally anyone seals.

`Faults` makes the syncer (or a trainer) misbehave in ways only a replay can see.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pandas as pd
import torch

from stack import TOKEN, ensure_syncer_stake
from tenzro_operator.chain import ChainClient, RoundCommit, SignedPayload, SlashReason
from tenzro_operator.evidence import non_finite_opening
from tenzro_operator.ipfs import IpfsClient
from tenzro_operator.keys import anvil_account
from tenzro_operator.roles.sponsor import SpecDraft, build_spec, post_task
from tenzro_operator.task_runtime import TaskRuntime
from tenzro_operator.transcript import BlobRef, FragmentRecord, Rejection, RoundTranscript, Submission
from tenzro_trainer.aggregation import build_rule, trainer_key, validate_payload
from tenzro_trainer.codec import decode_fragment, encode_fragment
from tenzro_trainer.commitment import ChunkTree, flatten_fragment
from tenzro_trainer.config import InnerConfig, OuterConfig
from tenzro_trainer.data.windows import WindowDataset
from tenzro_trainer.errors import PayloadError, PayloadRejected
from tenzro_trainer.fragments import fragment_state
from tenzro_trainer.inner import InnerTrainer
from tenzro_trainer.outer import OuterOptimizer, pseudo_gradient

SPONSOR, SYNCER, TRAINERS = 1, 2, (3, 4)
SERIES = ("elec_equip_orders", "sunspots_yearly", "us_macro_cpi", "us_macro_infl", "us_macro_m1",
          "us_macro_realgdp")


# ------------------------------------------------------------------------------ stack


def small_dataset() -> pd.DataFrame:
    """Six real series (120-310 points) of the default collection: seconds to train on."""
    from tenzro_trainer.data.collection import default_collection

    df = default_collection()
    return df[df["unique_id"].isin(SERIES)].reset_index(drop=True)


# ------------------------------------------------------------------------------ the run


@dataclass
class Faults:
    """Misbehaviour to inject (None = honest).

    Attributes:
        bad_hash: (round, fragment, trainer position): that trainer posts a payloadHash that is not
            the sha256 of its pinned bytes, and the syncer accepts the payload anyway.
        perturb: (round, fragment): the syncer commits that fragment's weights with 1e-3 added to
            its first tensor instead of the aggregate (and carries on from them).
        nan: (round, fragment, trainer position): that trainer sends NaNs; the (honest) syncer
            rejects the payload as NonFinite (proveInvalid with the opened chunk slashes the trainer).
        false_reject: (round, fragment, trainer position): the syncer rejects that trainer's valid
            payload as NonFinite anyway: on-chain it can only challenge its availability (which this
            trainer, with no daemon to answer, loses), and the replay names the lie.
    """

    bad_hash: tuple[int, int, int] | None = None
    perturb: tuple[int, int] | None = None
    nan: tuple[int, int, int] | None = None
    false_reject: tuple[int, int, int] | None = None


@dataclass
class SealedRun:
    """What a test needs about a run `play_run` sealed."""

    task_id: bytes
    task_name: str
    spec: object
    trainers: list[str]
    weights_roots: list[bytes] = field(default_factory=list)
    transcript_cids: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _clients(rpc_url: str, deployments: Path, trainer_accounts: tuple[int, ...]) -> dict:
    base = ChainClient(rpc_url, deployments)
    return {"base": base, "sponsor": base.with_account(anvil_account(SPONSOR)),
            "syncer": base.with_account(anvil_account(SYNCER)),
            "trainers": [base.with_account(anvil_account(i)) for i in trainer_accounts]}


def play_run(rpc_url: str, deployments: Path, ipfs: IpfsClient, df: pd.DataFrame, task_name: str, *,
             rounds: int = 2, fragments: int = 2, inner_steps: int = 3, batch_size: int = 16,
             aggregation: str | dict = "Mean", quorum: int | None = None, faults: Faults | None = None,
             seal: bool = True, trainer_accounts: tuple[int, ...] = TRAINERS,
             on_progress: Callable[[str, int], None] | None = None) -> SealedRun:
    """Post, enroll, train ``rounds`` rounds, finalize each, seal. Returns the `SealedRun`.

    ``trainer_accounts`` are anvil account indices (funded by the caller); M = their number and
    K = ``quorum`` (default M). ``on_progress(step, round)`` is called, on this thread, after the
    post (``"posted", -1``), after each ``finalizeRound`` (``"finalized", r``) and after the seal
    (``"sealed", rounds``); it may block to pace the run (e.g. while a browser catches up)."""
    progress = on_progress or (lambda step, rnd: None)
    t0 = time.perf_counter()
    faults = faults or Faults()
    c = _clients(rpc_url, deployments, trainer_accounts)
    sponsor, syncer, trainers = c["sponsor"], c["syncer"], c["trainers"]
    m = len(trainers)
    spec = build_spec(ipfs, SpecDraft(task_id=task_name, sponsor_address=sponsor.address, fragment_count=fragments,
                                      trainer_count=m, quorum=quorum or m, inner_steps=inner_steps, max_rounds=rounds,
                                      grace_window_ms=600_000, aggregation=aggregation, reward_pool=100 * TOKEN,
                                      min_stake=10 * TOKEN, max_missed_rounds=2), df)
    task_id, _ = post_task(sponsor, ipfs, spec)
    progress("posted", -1)
    ensure_syncer_stake(syncer, spec.syncer_bond_atto)  # an unlocked stake that covers the run's bond
    for t in trainers:  # the M-th enrollment opens round 0
        t.enroll_trainer(task_id, 10 * TOKEN, f"did:tenzro:machine:{t.address}")
    assert syncer.run_syncer_election(task_id) == syncer.address  # the only candidate; elections need Training
    order = [a.lower() for a in c["base"].trainers_of(task_id)]
    positions = {t.address.lower(): i for i, t in enumerate(trainers)}

    runtime = TaskRuntime.from_spec(spec)
    proto = spec.require_protocol()
    split = runtime.split(df)
    state = runtime.initial_state(proto.seed)  # what build_spec pinned
    workers = {}
    for t in trainers:
        i = order.index(t.address.lower())
        data = WindowDataset(split, TaskRuntime.shard_ids(split, proto, i), seed=proto.seed * 1000 + i)
        workers[t.address.lower()] = InnerTrainer(runtime.model_cfg, InnerConfig(steps=inner_steps,
                                                                                 batch_size=batch_size),
                                                  data, init_seed=proto.seed)
    outer_cfg = OuterConfig()
    outers = [OuterOptimizer(fragment_state(state, names), outer_cfg) for names in runtime.fragments]
    rule = build_rule(spec.aggregation_name, spec.aggregation_params)
    input_root = c["base"].get_run(task_id).initial_weights_root
    run = SealedRun(task_id, task_name, spec, order)

    challenged: list[tuple[int, int, str]] = []
    for r in range(rounds):
        # Trainers: inner steps, pseudo-gradients, pin, submit.
        for pos, t in enumerate(trainers):
            res = workers[t.address.lower()].run(state)
            pending = []
            for f, names in enumerate(runtime.fragments):
                delta = pseudo_gradient(fragment_state(state, names), fragment_state(res.state, names))
                if faults.nan == (r, f, pos):
                    delta = {n: torch.full_like(v, float("nan")) for n, v in delta.items()}
                blob = encode_fragment(delta, dict(task=runtime.task, round=r, fragment=f, trainer=t.address.lower(),
                                                   dtype="float32", kind="pseudo_gradient"))
                cid, h = ipfs.add(blob), hashlib.sha256(blob).digest()
                if faults.bad_hash == (r, f, pos):
                    h = h[:-1] + bytes([h[-1] ^ 0xFF])
                root, sumsq = ChunkTree(flatten_fragment(delta)).root
                pending.append(t.submit_outer_gradient(task_id, r, f, SignedPayload(root, sumsq, cid, h), wait=False))
            for p in pending:
                t.wait(p)

        # Syncer: collect from the chain, fetch, check, aggregate, outer step, pin, finalize.
        posted, signed = {}, {}
        for ev in syncer.get_logs(c["base"].deployment.deploy_block, syncer.block_number(), ["GradientSubmitted"],
                                  task_id=task_id):
            a = ev["args"]
            if a["round"] == r:
                posted[(int(a["fragment"]), a["trainer"].lower())] = (a["cid"], bytes(a["payloadHash"]))
                signed[(int(a["fragment"]), a["trainer"].lower())] = SignedPayload.from_event(a)
        new_state = dict(state)
        frag_records, hashes, cids = [], [], []
        bitmaps = [0] * len(order)
        rejections: list[list[Rejection]] = [[] for _ in runtime.fragments]
        for f, names in enumerate(runtime.fragments):
            updates = {}
            for trainer in sorted(order):
                cid, h = posted[(f, trainer)]
                verdict = _judge(ipfs.cat(cid), h, runtime.layouts[f], accept_bad_hash=faults.bad_hash is not None)
                if faults.false_reject == (r, f, positions[trainer]):
                    verdict = ("NonFinite", "claimed by a lying syncer")
                if isinstance(verdict, tuple):
                    sp = signed[(f, trainer)]
                    if verdict[1] != "claimed by a lying syncer" and verdict[0] == "NonFinite":
                        flat = flatten_fragment(decode_fragment(ipfs.cat(cid))[0])
                        syncer.prove_invalid(task_id, r, f, trainer, SlashReason.NON_FINITE, sp,
                                             non_finite_opening(ChunkTree(flat), flat))
                    else:  # no evidence of a defect: the syncer can only challenge availability
                        syncer.challenge_availability(task_id, r, f, trainer, sp)
                        challenged.append((r, f, trainer))
                    rejections[f].append(Rejection(trainer=trainer, cid=cid, sha256="0x" + h.hex(),
                                                   reason=verdict[0], detail=verdict[1]))
                    continue
                updates[trainer_key(order.index(trainer))] = verdict
                bitmaps[order.index(trainer)] |= 1 << f
            new_frag = outers[f].step(rule(updates) if updates else outers[f].zero_aggregate())
            if faults.perturb == (r, f):
                first = sorted(new_frag)[0]
                new_frag[first] = new_frag[first] + 1e-3
                with torch.no_grad():
                    for n, p in zip(outers[f].names, outers[f].params):
                        p.copy_(new_frag[n])
            new_state.update(new_frag)
        blobs = runtime.encode_weights(new_state, r)
        for f, blob in enumerate(blobs):
            cids.append(ipfs.add(blob))
            hashes.append(hashlib.sha256(blob).digest())
        wroot = TaskRuntime.weights_root(blobs)
        for f in range(len(blobs)):
            subs = _accepted_of(order, posted, f, bitmaps)
            frag_records.append(FragmentRecord(fragment=f, accepted=subs, rejected=rejections[f],
                                               weights=BlobRef(cid=cids[f], sha256="0x" + hashes[f].hex()),
                                               aggregated=bool(subs)))
        transcript = RoundTranscript(task_id="0x" + task_id.hex(), round=r,
                                     rule={"name": spec.aggregation_name, "params": spec.aggregation_params},
                                     outer={"lr": outer_cfg.lr, "momentum": outer_cfg.momentum,
                                            "nesterov": outer_cfg.nesterov},
                                     input_weights_root="0x" + input_root.hex(), weights_root="0x" + wroot.hex(),
                                     accepted_count=sum(bin(b).count("1") for b in bitmaps), fragments=frag_records)
        tbytes = transcript.canonical_bytes()
        tcid = ipfs.add(tbytes)
        syncer.finalize_round(RoundCommit(task_id=task_id, round=r, fragment_hashes=hashes, fragment_cids=cids,
                                          accepted_bitmaps=bitmaps, transcript_hash=hashlib.sha256(tbytes).digest(),
                                          transcript_cid=tcid))
        state, input_root = new_state, wroot
        run.weights_roots.append(wroot)
        run.transcript_cids.append(tcid)
        progress("finalized", r)
    if seal:
        sealer = c["base"].with_account(anvil_account(0))
        if challenged:  # unanswered availability challenges expire before the seal
            sealer.mine(seconds=sealer.get_run(task_id).challenge_seconds + 1)
            for r, f, trainer in challenged:
                sealer.expire_availability(task_id, r, f, trainer)
        sealer.seal(task_id)
        progress("sealed", rounds)
    run.seconds = time.perf_counter() - t0
    return run


def _judge(blob: bytes, payload_hash: bytes, layout, accept_bad_hash: bool):
    """The syncer's check of one payload: its tensors, or (SlashReason name, detail)."""
    if hashlib.sha256(blob).digest() != payload_hash and not accept_bad_hash:
        return ("HashMismatch", "payload bytes do not hash to the posted payloadHash")
    try:
        tensors, _ = decode_fragment(blob)
        validate_payload(tensors, layout)
    except PayloadError as exc:
        return ("Malformed", str(exc))
    except PayloadRejected as exc:
        return ("NonFinite" if exc.reason == "non_finite" else "Malformed", str(exc))
    return tensors


def _accepted_of(order: list[str], posted: dict, f: int, bitmaps: list[int]) -> list[Submission]:
    out = []
    for i, trainer in enumerate(order):
        if bitmaps[i] >> f & 1:
            cid, h = posted[(f, trainer)]
            out.append(Submission(trainer=trainer, cid=cid, sha256="0x" + h.hex()))
    return sorted(out, key=lambda s: s.trainer)
