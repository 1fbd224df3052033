"""A second, independent implementation of a whole root-flow run on the devnet, for the replay tests.

No daemon: this module plays every role of the protocol directly with the library pieces, in
one process, so the tests get a sealed run without waiting for (or trusting) the trainer and
syncer daemons. Every run is settled by root (contracts/PROTOCOL.md §5):

1. the contracts come from `stack.deploy_stack` (ape's build artifacts through web3, in the
   shape of ``deployments/<network>.json``); `fund` mints TNZO to the role accounts.
2. `play_run`: the sponsor builds and posts a spec (`roles.sponsor`; `post_task` puts the run in
   the root flow with its initial fragments root and outer rule); the syncer stakes; the trainers
   enroll (the M-th opens round 0); the syncer is elected (request, then elect).
3. each round r, as trainer: every trainer runs H inner AdamW steps (`InnerTrainer`) from the
   round's input weights on its shard, and per fragment pins ``pseudo_gradient`` as safetensors,
   commits to it with the §2 chunk root and sum of squares, and signs the EIP-712
   ``OuterGradient`` struct over the round's input weights root; its off-chain messages are
   built as a daemon sends them (a signed `CommitMessage`, then the `RevealMessage`), but handed
   to the syncer directly instead of over pubsub. A trainer on the forced path (`Faults.forced_nan`)
   also sends ``commitSubmission`` in the commit phase and reveals with ``submitOuterGradient``
   after it.
4. as syncer: it keeps a commitment only when its signature recovers to the trainer it names,
   and after the commit phase (reached with anvil time travel, ``evm_increaseTime``, not by
   sleeping) a reveal only when it is signed by that trainer over the round's input weights and
   opens that commitment; it fetches each payload from IPFS and checks it as the syncer daemon
   does (sha256 vs payloadHash, decode, names / shapes / finite, the decoded vector is the signed
   §2 commitment). A rejected payload is left out and listed with its reason in the transcript; a
   forced non-finite one is proven invalid on-chain first (``proveInvalid`` with the opened
   non-finite chunk: the trainer is slashed), as the registry holds the syncer to it. The
   accepted payloads are aggregated with the spec's rule (keyed by trainer index), the outer
   Nesterov step is applied, the new weights and momentum are pinned,
   and so is a `RoundTranscript` that lists every accepted signed struct; ``commitRound`` carries
   the §6 fragments root (weights, momentum and accepted set per fragment), one accepted bitmap
   per trainer, the cumulative credits before the round (summed here from the driver's own
   bitmaps) and the §2 weights roots of the fragments.
5. after the last round's challenge window (time travel again) anyone seals (``sealRootRun``),
   and each trainer claims ``floor(claimable x credits / totalCredits)`` (claimable: the pool less
   the syncer's fees) with the Merkle path of its credits leaf in the registry's credits root.

The driver has no norm screen and no loss-improvement scoring (the specs set no ``score_min``,
and the honest payloads here are far inside the daemon's norm screen). `Faults` makes the syncer
or a trainer misbehave in ways only a replay can see, or that the honest syncer must handle.
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
from tenzro_operator.chain import ChainClient, SignedPayload, SlashReason
from tenzro_operator.evidence import non_finite_opening
from tenzro_operator.ipfs import IpfsClient
from tenzro_operator.keys import anvil_account
from tenzro_operator.receipt import weights_root
from tenzro_operator.roles.sponsor import SpecDraft, build_spec, post_task
from tenzro_operator.root_flow import CommitMessage, RevealMessage
from tenzro_operator.task_runtime import TaskRuntime
from tenzro_operator.transcript import BlobRef, FragmentRecord, Rejection, RoundTranscript, Submission
from tenzro_trainer import round_commitment as rc
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
        perturb: (round, fragment): the syncer commits that fragment's weights with 1e-3 added to
            its first tensor instead of the outer step's (and carries on from them); its
            commitments (fragments root, weights root, transcript) are consistent with what it
            pinned, so only a recomputation of the round shows the lie.
        nan: (round, fragment, trainer position): that trainer delivers NaNs off-chain; the
            (honest) syncer leaves the payload out and lists it in the transcript as NonFinite.
            Nothing happens on-chain: an off-chain submission left out only earns no credit.
        forced_nan: (round, fragment, trainer position): that trainer delivers NaNs and forces the
            submission on-chain too (``commitSubmission`` in the commit phase,
            ``submitOuterGradient`` after it); the honest syncer must act on it before it may
            commit: it proves it invalid (``proveInvalid`` opening the non-finite chunk, the
            trainer slashed) and lists it in the transcript as NonFinite.
        bad_hash: (round, fragment, trainer position): that trainer signs a payloadHash that is not
            the sha256 of its pinned bytes, and the (lying) syncer accepts the payload anyway; its
            commitments are consistent, so only a replay that hashes the payload names it.
    """

    perturb: tuple[int, int] | None = None
    nan: tuple[int, int, int] | None = None
    forced_nan: tuple[int, int, int] | None = None
    bad_hash: tuple[int, int, int] | None = None


@dataclass
class SealedRun:
    """What a test needs about a run `play_run` sealed.

    Attributes:
        trainers: lower-case addresses in enrollment (trainer index) order.
        weights_roots: per round, the RunRoot weights root over the fragments' §2 roots, as the
            driver computed it (the registry's ``RoundCommitted.weightsRoot`` must be it).
        transcript_cids: per round, the pinned transcript's CID.
        credits: each trainer's cumulative credits after the last round (trainer-index order).
        rewards: each trainer's claimed reward (atto-units; empty when ``claim`` was off).
    """

    task_id: bytes
    task_name: str
    spec: object
    trainers: list[str]
    weights_roots: list[bytes] = field(default_factory=list)
    transcript_cids: list[str] = field(default_factory=list)
    credits: list[int] = field(default_factory=list)
    rewards: list[int] = field(default_factory=list)
    seconds: float = 0.0


@dataclass
class _Delivered:
    """One trainer's submission of one fragment as the syncer receives it."""

    trainer: str  # lower-case address
    index: int  # trainer index (``trainersOf`` order)
    reveal: RevealMessage
    forced: bool = False

    @property
    def signed(self) -> SignedPayload:
        return self.reveal.signed_payload()


def _clients(rpc_url: str, deployments: Path, trainer_accounts: tuple[int, ...]) -> dict:
    base = ChainClient(rpc_url, deployments)
    return {"base": base, "sponsor": base.with_account(anvil_account(SPONSOR)),
            "syncer": base.with_account(anvil_account(SYNCER)),
            "trainers": [base.with_account(anvil_account(i)) for i in trainer_accounts]}


def _mine_past(client: ChainClient, second: int) -> None:
    """Time travel (anvil): mine a block stamped after chain second ``second``."""
    now = client.block_timestamp("latest")
    client.mine(seconds=max(0, second - now) + 1)


def play_run(rpc_url: str, deployments: Path, ipfs: IpfsClient, df: pd.DataFrame, task_name: str, *,
             rounds: int = 2, fragments: int = 2, inner_steps: int = 3, batch_size: int = 16,
             aggregation: str | dict = "Mean", quorum: int | None = None, faults: Faults | None = None,
             seal: bool = True, claim: bool = True, trainer_accounts: tuple[int, ...] = TRAINERS,
             on_progress: Callable[[str, int], None] | None = None) -> SealedRun:
    """Post, enroll, train ``rounds`` rounds, commit each by root, seal, claim. Returns the `SealedRun`.

    ``trainer_accounts`` are anvil account indices (funded by the caller); M = their number and
    K = ``quorum`` (default M). ``claim`` (with ``seal``): every trainer with credits claims its
    reward. ``on_progress(step, round)`` is called, on this thread, after the post
    (``"posted", -1``), after each ``commitRound`` (``"committed", r``) and after the seal
    (``"sealed", rounds``); it may block to pace the run (e.g. while a browser catches up)."""
    progress = on_progress or (lambda step, rnd: None)
    t0 = time.perf_counter()
    faults = faults or Faults()
    c = _clients(rpc_url, deployments, trainer_accounts)
    base, sponsor, syncer, trainers = c["base"], c["sponsor"], c["syncer"], c["trainers"]
    m = len(trainers)
    spec = build_spec(ipfs, SpecDraft(task_id=task_name, sponsor_address=sponsor.address, fragment_count=fragments,
                                      trainer_count=m, quorum=quorum or m, inner_steps=inner_steps, max_rounds=rounds,
                                      grace_window_ms=600_000, aggregation=aggregation, reward_pool=100 * TOKEN,
                                      min_stake=10 * TOKEN), df)
    task_id, _ = post_task(sponsor, ipfs, spec)  # postTask, then useRootFlow
    assert base.is_root_flow(task_id)
    progress("posted", -1)
    ensure_syncer_stake(syncer, spec.syncer_bond_atto)  # an unlocked stake that covers the run's bond
    for t in trainers:  # the M-th enrollment opens round 0
        t.enroll_trainer(task_id, 10 * TOKEN, f"did:tenzro:machine:{t.address}")
    assert syncer.run_syncer_election(task_id) == syncer.address  # the only candidate; elections need Training
    order = [a.lower() for a in base.trainers_of(task_id)]
    by_address = {t.address.lower(): t for t in trainers}
    chain_id, registry = base.chain_id, base.registry.address

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
    outer_cfg = OuterConfig()  # DiLoCo's 0.7 / 0.9 / Nesterov: the specs here set no metadata.outer
    outers = [OuterOptimizer(fragment_state(state, names), outer_cfg) for names in runtime.fragments]
    rule = build_rule(spec.aggregation_name, spec.aggregation_params)
    run = SealedRun(task_id, task_name, spec, order)
    credits = [0] * m  # cumulative, before the open round (what commitRound checks against its root)

    for r in range(rounds):
        info = base.get_run(task_id)
        assert info.current_round == r
        input_root = info.weights_root
        closes = base.commit_phase(task_id)[0]

        # Trainers: inner steps, pseudo-gradients, pin, sign; commitments in the commit phase.
        commitments: dict[tuple[int, str], bytes] = {}  # the syncer's intake: (fragment, trainer) -> word
        reveals: list[_Delivered] = []
        for pos, t in enumerate(trainers):
            me = t.address.lower()
            res = workers[me].run(state)
            for f, names in enumerate(runtime.fragments):
                delta = pseudo_gradient(fragment_state(state, names), fragment_state(res.state, names))
                if (r, f, pos) in (faults.nan, faults.forced_nan):
                    delta = {n: torch.full_like(v, float("nan")) for n, v in delta.items()}
                blob = encode_fragment(delta, dict(task=runtime.task, round=r, fragment=f, trainer=me,
                                                   dtype="float32", kind="pseudo_gradient"))
                root, sumsq = ChunkTree(flatten_fragment(delta)).root
                digest = hashlib.sha256(blob).digest()
                if faults.bad_hash == (r, f, pos):
                    digest = digest[:-1] + bytes([digest[-1] ^ 0xFF])
                signed = t.sign_outer_gradient(task_id, r, f, SignedPayload(root, sumsq, ipfs.add(blob), digest),
                                               base_root=input_root)
                reveal = RevealMessage.of(task_id, r, f, me, input_root, signed)
                commit = CommitMessage.signed(t.account, chain_id, registry, reveal)
                forced = faults.forced_nan == (r, f, pos)
                if forced:  # on-chain too: the commitment in the commit phase
                    t.commit_submission(task_id, r, f, reveal.commitment())
                # The syncer keeps a commitment only when it is its trainer's, in the commit phase.
                assert base.next_block_time() <= closes, "trained past the commit phase"
                assert commit.signer(chain_id, registry) == me
                commitments[(f, me)] = commit.word()
                reveals.append(_Delivered(me, order.index(me), reveal, forced))

        _mine_past(base, closes)  # the reveal phase
        for d in reveals:
            if d.forced:  # the forced reveal (the registry checks it opens the on-chain commitment)
                by_address[d.trainer].submit_outer_gradient(task_id, r, d.reveal.fragment, d.signed)
        assert base.commit_phase(task_id)[1] == 0  # every on-chain commitment revealed

        # Syncer: take the reveals that open a timely commitment, fetch, check, act, aggregate.
        new_state = dict(state)
        subs: dict[int, list[_Delivered]] = {f: [] for f in range(len(runtime.fragments))}
        for d in reveals:
            rv = d.reveal
            assert rv.signer(chain_id, registry) == d.trainer and rv.base_root == "0x" + input_root.hex()
            assert commitments[(rv.fragment, d.trainer)] == rv.commitment()
            subs[rv.fragment].append(d)
        bitmaps = [0] * m
        sets: dict[int, dict[int, bytes]] = {}
        records = []
        for f, names in enumerate(runtime.fragments):
            updates, accepted, rejected = {}, [], []
            for d in sorted(subs[f], key=lambda x: x.index):
                raw = ipfs.cat(d.signed.cid, max_bytes=runtime.payload_cap(f))
                verdict = _judge(raw, d.signed, runtime.layouts[f], accept_bad_hash=faults.bad_hash is not None)
                if isinstance(verdict, tuple):
                    reason, detail, flat = verdict
                    if d.forced:  # a forced submission binds the syncer: proven invalid, its trainer slashed
                        assert reason == "NonFinite", (reason, detail)
                        syncer.prove_invalid(task_id, r, f, d.trainer, SlashReason.NON_FINITE, d.signed,
                                             non_finite_opening(ChunkTree(flat), flat))
                    rejected.append(Rejection(trainer=d.trainer, cid=d.signed.cid,
                                              sha256="0x" + d.signed.payload_hash.hex(), reason=reason,
                                              detail=detail[:500]))
                    continue
                updates[trainer_key(d.index)] = verdict
                bitmaps[d.index] |= 1 << f
                sets.setdefault(f, {})[d.index] = d.reveal.struct_hash()
                p = d.signed
                accepted.append(Submission(trainer=d.trainer, cid=p.cid, sha256="0x" + p.payload_hash.hex(),
                                           base_root=d.reveal.base_root, payload_root="0x" + p.payload_root.hex(),
                                           payload_sumsq=p.payload_sumsq, signature="0x" + p.signature.hex()))
            new_frag = outers[f].step(rule(updates) if updates else outers[f].zero_aggregate())
            if faults.perturb == (r, f):
                first = sorted(new_frag)[0]
                new_frag[first] = new_frag[first] + 1e-3
                with torch.no_grad():
                    for n, p in zip(outers[f].names, outers[f].params):
                        p.copy_(new_frag[n])
            new_state.update(new_frag)
            records.append((accepted, rejected, bool(updates)))

        # Pin the new weights and momentum; the §6 leaves; the transcript; commitRound.
        momentum = {n: mo for o in outers for n, mo in zip(o.names, o.momentum)}
        blobs = runtime.encode_weights(new_state, r)
        mblobs = runtime.encode_weights(momentum, r, kind="momentum")
        states, hashes, frs = [], [], []
        for f, names in enumerate(runtime.fragments):
            w = flatten_fragment({n: new_state[n] for n in names})
            mo = flatten_fragment({n: momentum[n] for n in names})
            states.append(rc.FragmentState.build(f, w, mo, rc.AcceptedSet(sets.get(f, {}), m)))
            hashes.append(states[f].leaf.weights_root)  # the §2 root of the new weights (PROTOCOL.md §5)
            accepted, rejected, aggregated = records[f]
            frs.append(FragmentRecord(fragment=f, accepted=accepted, rejected=rejected, aggregated=aggregated,
                                      weights=_pin(ipfs, blobs[f]), momentum=_pin(ipfs, mblobs[f])))
        wroot = weights_root(hashes)
        transcript = RoundTranscript(task_id="0x" + task_id.hex(), round=r,
                                     rule={"name": spec.aggregation_name, "params": dict(spec.aggregation_params)},
                                     outer={"lr": outer_cfg.lr, "momentum": outer_cfg.momentum,
                                            "nesterov": outer_cfg.nesterov},
                                     input_weights_root="0x" + input_root.hex(), weights_root="0x" + wroot.hex(),
                                     accepted_count=sum(bin(b).count("1") for b in bitmaps), fragments=frs)
        tcid = ipfs.add(transcript.canonical_bytes())
        ev = syncer.commit_round(task_id, r, rc.fragments_root([s.leaf for s in states]), bitmaps, credits, hashes,
                                 transcript.hash(), tcid).event("RoundCommitted")
        assert bytes(ev["weightsRoot"]) == wroot  # the registry's RunRoot over the committed fragment hashes
        credits = [cr + sum(n for f, n in enumerate(runtime.sizes) if b >> f & 1) for cr, b in zip(credits, bitmaps)]
        assert bytes(ev["creditsRoot"]) == rc.credits_tree(credits).root  # the registry summed what we did
        state = new_state
        run.weights_roots.append(wroot)
        run.transcript_cids.append(tcid)
        progress("committed", r)
    run.credits = credits
    if seal:
        sealer = base.with_account(anvil_account(0))
        _mine_past(sealer, base.block_timestamp("latest") + base.get_run(task_id).challenge_seconds)
        sealer.seal_root_run(task_id)  # anyone, after the last round's challenge window
        progress("sealed", rounds)
        if claim:
            root = base.root_state(task_id)[2]
            tree = rc.credits_tree(credits)
            assert tree.root == root
            for i, a in enumerate(order):
                if credits[i]:
                    ev = by_address[a].claim_reward(task_id, i, credits[i], tree.path(i)).event("RewardClaimed")
                    run.rewards.append(int(ev["reward"]))
                else:
                    run.rewards.append(0)
    run.seconds = time.perf_counter() - t0
    return run


def _pin(ipfs: IpfsClient, blob: bytes) -> BlobRef:
    return BlobRef(cid=ipfs.add(blob), sha256="0x" + hashlib.sha256(blob).hexdigest())


def _judge(blob: bytes, signed: SignedPayload, layout, accept_bad_hash: bool = False):
    """The syncer's check of one payload: its tensors, or (Rejection reason, detail, flat vector or None)."""
    if hashlib.sha256(blob).digest() != signed.payload_hash and not accept_bad_hash:
        return ("HashMismatch", "payload bytes do not hash to the signed payloadHash", None)
    try:
        tensors, _ = decode_fragment(blob)
    except PayloadError as exc:
        return ("Malformed", str(exc), None)
    flat = flatten_fragment(tensors)
    if ChunkTree(flat).root != (signed.payload_root, signed.payload_sumsq):
        return ("Unavailable", "the payload is not the vector of the signed commitment", None)
    try:
        validate_payload(tensors, layout)
    except PayloadRejected as exc:
        return ("NonFinite" if exc.reason == "non_finite" else "Malformed", str(exc), flat)
    return tensors


# ------------------------------------------------------------------------------ reading a run back


def committed(chain: ChainClient, task_id: bytes) -> dict[int, dict]:
    """``round -> RoundCommitted args`` of a run, read from the chain's logs (the last event of each
    round: the runs here are never rewound)."""
    start = chain.run_start_block(chain.get_run(task_id))
    return {int(e["args"]["round"]): dict(e["args"])
            for e in chain.get_logs(start, chain.block_number(), ["RoundCommitted"], task_id=task_id)}


def events_named(chain: ChainClient, task_id: bytes, name: str) -> list[dict]:
    """The args of every ``name`` event of a run, in chain order."""
    start = chain.run_start_block(chain.get_run(task_id))
    return [dict(e["args"]) for e in chain.get_logs(start, chain.block_number(), [name], task_id=task_id)]


def transcript(ipfs: IpfsClient, cid: str) -> RoundTranscript:
    """A pinned transcript, parsed."""
    return RoundTranscript.parse(ipfs.cat(cid))
