"""Local simulation driver, no chain: M workers and one syncer in one process for N rounds.

The round is the one of DESIGN.md, with the network replaced by function calls:

1. every worker loads the global weights and runs H inner AdamW steps on its shard
   (:class:`~tenzro_trainer.inner.InnerTrainer`);
2. per fragment it computes ``delta = global - local`` and encodes it as safetensors bytes
   (:mod:`tenzro_trainer.codec`), which the syncer decodes, validates
   (:func:`~tenzro_trainer.aggregation.screen_payloads`), aggregates with the task's rule and
   applies with the outer Nesterov optimizer (:class:`~tenzro_trainer.outer.OuterOptimizer`);
3. the new global weights are evaluated on held-out rolling-origin windows.

:func:`simulate_sync` runs the baseline of the benchmarks: fully synchronous data-parallel AdamW
with the same global batch (M x batch_size, each worker's share drawn from its own shard) and the
same total number of inner steps (rounds x H).

Bytes are counted per worker: upload of the pseudo-gradient payloads and download of the new
global weights each round (DiLoCo), gradient upload and weight download each step (synchronous,
parameter-server accounting; a ring all-reduce moves 2 (M-1)/M of that, the same for both
methods). ``tensor_bytes`` counts fp32 tensor data only; ``encoded_bytes`` adds safetensors headers.

``SimConfig.compression`` (a codec of :mod:`tenzro_trainer.compression`, default None: the dense
codec above) makes every worker encode its pseudo-gradients with that codec through its own
:class:`~tenzro_trainer.compression.PayloadCompressor` (error feedback per worker and fragment)
and the syncer decode them exactly; ``upload_bytes`` is then what one worker uploads that round.
An attacked pseudo-gradient that the codec cannot encode (NaN) counts as rejected.
``byzantine_accepted`` counts the attackers' payloads that passed the screen and scoring in a round
(the ones the protocol would credit; the rule still weighs them); ``honest_sent`` and
``honest_credited`` the same for the honest trainers; ``byzantine_genuine_sent`` and
``byzantine_genuine_credited`` the attackers' payloads that are their own untouched update of all H
inner steps (work done, not forged: ``stale``'s and ``lazy_late``'s round 1), and those of them
credited. With ``credit`` the credited ones are the gate's (`tenzro_trainer.credit`: credit by a
trainer's history; the rule gets those that also passed the round's contribution test, clipped to
their median norm).

``SimConfig.credit`` (a `tenzro_trainer.credit.CreditConfig` or its dict; needs ``scoring``) replaces
the plain ``score > 0`` by the credit checks of issue #26 (near-copy, norm outlier, contribution
test on batches drawn with the round's reveal, a moving average of passes, clipping to the median
norm, the audit by exact replay that bars a trainer whose round does not reproduce: one trainer a
round, drawn, and every trainer credited in round 1, `CreditConfig.first_round_replay`); the reveal of
round r is sha256(task, seed, r), which the simulated attackers do not use: their probe
(`AttackView.probes`) is the score on the public batch of their own shard (`ShardScorer.score`),
which is the syncer's score exactly when ``credit`` is None. The audit replays a worker's round from
the inner state it had at the round's start (`InnerTrainer.state_dict`; what an honest trainer
declares), on the CPU with one torch thread, so with ``audit`` > 0 the run holds torch to one
thread (an honest round then replays bit for bit) and needs the dense codec and no overlap.
``barred`` counts the trainers barred so far (honest ones separately: ``honest_barred``).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field, replace
from typing import Callable

import pandas as pd
import torch
from torch import Tensor

from tenzro_trainer.aggregation import build_rule, screen_payloads
from tenzro_trainer.attacks import AttackView, build_attack
from tenzro_trainer.codec import decode_fragment, encode_fragment
from tenzro_trainer.compression import PayloadCompressor, decode_payload, parse_codec
from tenzro_trainer.config import InnerConfig, ModelConfig, OuterConfig
from tenzro_trainer.data.collection import default_collection
from tenzro_trainer.data.hashing import verify_dataset_hash
from tenzro_trainer.data.windows import WindowDataset, shard_series, train_heldout_split
from tenzro_trainer.evaluate import HeldoutEvaluator, window_loss
from tenzro_trainer.fragments import fragment_state, partition
from tenzro_trainer.inner import InnerResult, InnerTrainer
from tenzro_trainer.models import build_model
from tenzro_trainer.outer import OuterOptimizer, pseudo_gradient
from tenzro_trainer.credit import CreditConfig, CreditGate, Verdict
from tenzro_trainer.replay import replay_round, reproduces
from tenzro_trainer.scoring import ShardScorer

@dataclass
class SimConfig:
    """A simulated run. ``attackers`` maps worker index -> attack name of
    :data:`tenzro_trainer.attacks.ATTACK_NAMES` (``"absent"``: the worker sends nothing)."""

    model: ModelConfig = field(default_factory=lambda: ModelConfig.preset("demo"))
    inner: InnerConfig = field(default_factory=lambda: InnerConfig(batch_size=32))
    outer: OuterConfig = field(default_factory=OuterConfig)
    workers: int = 4
    rounds: int = 3
    fragments: int = 4
    rule: str = "Mean"
    rule_params: dict = field(default_factory=dict)
    norm_multiple: float | None = None
    seed: int = 0
    heldout_frac: float = 0.1
    max_windows_per_series: int = 12
    train_windows_per_series: int = 8
    attackers: dict[int, str] = field(default_factory=dict)
    # data shards (the spec's ``protocol.shards``): worker i trains shard i mod shards, so with
    # shards = workers / r every shard is trained by r workers and excluding one loses no data;
    # None: one shard per worker
    shards: int | None = None
    # loss-improvement scoring (tenzro_trainer.scoring): windows per round's scoring batch, drawn from
    # each payload's trainer's own shard as the root-flow syncer does; payloads whose application
    # alone does not lower the loss on it are left out; 0: off
    scoring: int = 0
    task: str = "sim"
    dataset_hash: str | None = None  # the task spec's dataset_hash; checked before training when given
    compression: object | None = None  # a codec (tenzro_trainer.compression) or its dict; None: dense payloads
    # overlap (Streaming / eager DiLoCo): from round 2 on, a worker runs this many of the round's H
    # inner steps from its own previous-round weights while the syncer finalizes, then rebases on the
    # new global weights (`InnerTrainer.rebase`) and runs the rest; 0: wait for the weights (DiLoCo),
    # H: the whole round one outer step behind
    overlap_steps: int = 0
    # the credit checks of issue #26 (tenzro_trainer.credit) instead of score > 0; needs scoring
    credit: CreditConfig | dict | None = None


@dataclass
class SimResult:
    """Per-round metrics (round 0 = the initial weights) and the final global weights."""

    rounds: list[dict]
    state: dict[str, Tensor]
    num_params: int
    wall_s: float

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.rounds)


class _Eval:
    def __init__(self, cfg: SimConfig, df: pd.DataFrame):
        if cfg.dataset_hash is not None:
            verify_dataset_hash(df, cfg.dataset_hash)
        self.split = train_heldout_split(df, cfg.model.context_len, cfg.model.horizon, cfg.heldout_frac,
                                         min_context=cfg.model.effective_min_context)
        self.heldout = HeldoutEvaluator(cfg.model, self.split, cfg.max_windows_per_series, device=cfg.inner.device)
        self.train_windows = WindowDataset(self.split).fixed_windows(cfg.train_windows_per_series)

    def __call__(self, state: dict[str, Tensor]) -> dict:
        res = self.heldout(state)
        return {"heldout_loss": res.loss, "mase": res.mase, "smape": res.smape,
                "train_window_loss": window_loss(self.heldout.model, self.train_windows)}


def _initial_state(cfg: SimConfig) -> dict[str, Tensor]:
    torch.manual_seed(cfg.seed)
    return {k: v.detach().clone() for k, v in build_model(cfg.model).state_dict().items()}


def _samplers(cfg: SimConfig, ev: _Eval) -> list[WindowDataset]:
    shards = shard_series(ev.split.unique_ids, cfg.shards or cfg.workers)
    return [WindowDataset(ev.split, shards[i % len(shards)], seed=cfg.seed * 1000 + cfg.inner.seed * 100 + i)
            for i in range(cfg.workers)]


def simulate(cfg: SimConfig, df: pd.DataFrame | None = None, log: Callable[[dict], None] | None = None) -> SimResult:
    """Run DiLoCo for ``cfg.rounds`` rounds on ``df`` (default: the default collection).

    Raises:
        DatasetHashMismatch: ``cfg.dataset_hash`` is set and ``df`` hashes differently.
        PayloadError, AggregationError: a payload or the rule's inputs are unusable.
    """
    credit_cfg = None if cfg.credit is None else \
        cfg.credit if isinstance(cfg.credit, CreditConfig) else CreditConfig(**cfg.credit)
    if credit_cfg is not None and credit_cfg.audit:
        if cfg.compression is not None or cfg.overlap_steps:
            raise ValueError("the credit audit replays dense payloads of whole rounds: it needs compression=None "
                             "and overlap_steps=0")
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # as the replay: an honest round replays bit for bit
        try:
            return _simulate(cfg, credit_cfg, df, log)
        finally:
            torch.set_num_threads(threads)
    return _simulate(cfg, credit_cfg, df, log)


def _simulate(cfg: SimConfig, credit_cfg: CreditConfig | None, df: pd.DataFrame | None,
              log: Callable[[dict], None] | None) -> SimResult:
    t_start = time.perf_counter()
    df = default_collection() if df is None else df
    ev = _Eval(cfg, df)
    state = _initial_state(cfg)
    frags = partition(state, cfg.fragments)
    outers = [OuterOptimizer(fragment_state(state, names), cfg.outer) for names in frags]
    rules = [build_rule(cfg.rule, cfg.rule_params) for _ in frags]  # one per fragment: CenteredClip keeps history
    samplers = _samplers(cfg, ev)
    workers = [InnerTrainer(cfg.model, cfg.inner, data, init_seed=cfg.seed) for data in samplers]
    attackers = {i: build_attack(name) for i, name in cfg.attackers.items()}
    honest_idx = [i for i in range(cfg.workers) if i not in attackers]
    forged = {f"worker{i:03d}" for i in attackers}  # the attackers' payload names
    attack_rng = torch.Generator().manual_seed(cfg.seed * 7919 + 17)
    layouts = [{n: (tuple(state[n].shape), torch.float32) for n in names} for names in frags]
    tensor_bytes = sum(t.numel() * 4 for t in state.values())
    codec = None if cfg.compression is None else parse_codec(cfg.compression)
    compressors = [PayloadCompressor(codec) for _ in workers] if codec is not None else None
    shapes = [{n: tuple(state[n].shape) for n in names} for names in frags]
    scorer = ShardScorer(build_model(cfg.model), ev.split, lambda i: samplers[i].unique_ids, salt=cfg.task,
                         size=cfg.scoring) if cfg.scoring else None  # each trainer's own shard, as the syncer
    credit = None
    if credit_cfg is not None:
        if scorer is None:
            raise ValueError("SimConfig.credit needs scoring > 0 (the contribution test's batch size)")
        credit = CreditGate(scorer, credit_cfg)
    with torch.random.fork_rng():  # the probe's model draws its (unused) weights off the run's RNG stream
        self_probe = ShardScorer(build_model(cfg.model), ev.split, lambda i: samplers[i].unique_ids, salt=cfg.task,
                                 size=cfg.scoring or 64)  # what an attacker computes on its own shard (public seed)
    previous: list[dict[str, Tensor] | None] = [None] * len(frags)  # each fragment's last applied aggregate
    ends: dict[int, dict[str, Tensor]] = {}  # each worker's local weights at the end of its last round
    if not 0 <= cfg.overlap_steps <= cfg.inner.steps:
        raise ValueError(f"overlap_steps must be in [0, H={cfg.inner.steps}], got {cfg.overlap_steps}")
    rounds = [{"round": 0, **ev(state), "train_loss": float("nan"), "tensor_bytes_per_worker": 0,
               "encoded_bytes_per_worker": 0, "upload_bytes": 0, "rejected": 0, "byzantine_accepted": 0,
               "byzantine_genuine_sent": 0, "byzantine_genuine_credited": 0,
               "honest_sent": 0, "honest_credited": 0, "barred": 0, "honest_barred": 0, "seconds": 0.0}]
    if log:
        log(rounds[-1])
    total_encoded = total_tensor = 0
    for r in range(1, cfg.rounds + 1):
        t0 = time.perf_counter()
        starts = {i: w.state_dict() for i, w in enumerate(workers)} if credit is not None and credit.cfg.audit else {}
        results = {i: _inner_round(w, state, ends.get(i), cfg.overlap_steps) if i not in attackers or
                   attackers[i].inner_steps(r) is None else w.run(state, steps=attackers[i].inner_steps(r))
                   for i, w in enumerate(workers) if i not in attackers or attackers[i].needs_training(r)}
        ends = {i: res.state for i, res in results.items()}
        payloads: list[dict[str, bytes]] = [dict() for _ in frags]
        sent = [0] * len(frags)
        genuine: list[set[str]] = [set() for _ in frags]  # attackers that sent their own H-step update
        for f, names in enumerate(frags):
            own = {i: pseudo_gradient(fragment_state(state, names), fragment_state(res.state, names))
                   for i, res in results.items()}
            honest = [own[i] for i in honest_idx]
            probes = {i: _probe(self_probe, r, i, state, names) for i in attackers}
            for i in range(cfg.workers):
                delta = own.get(i)
                if i in attackers:
                    delta = attackers[i].forge(AttackView(r, f, cfg.workers, len(attackers), honest, delta,
                                                          previous[f], attack_rng, probes=probes, index=i,
                                                          inner_steps=cfg.inner.steps, screen=cfg.norm_multiple))
                    if delta is None:
                        continue
                    if _untouched(delta, own.get(i)) and attackers[i].inner_steps(r) is None:
                        genuine[f].add(f"worker{i:03d}")
                sent[f] += 1
                meta = dict(task=cfg.task, round=r, fragment=f, trainer=f"worker{i:03d}", dtype="float32",
                            kind="pseudo_gradient")
                if compressors is None:
                    payloads[f][f"worker{i:03d}"] = encode_fragment(delta, meta)
                    continue
                try:
                    payloads[f][f"worker{i:03d}"] = compressors[i].encode(r, f, delta, meta)
                except ValueError:
                    if i not in attackers:
                        raise  # an honest pseudo-gradient the codec cannot encode is a bug, not an attack
        # one worker's upload
        up = max(sum(len(p.get(f"worker{i:03d}", b"")) for p in payloads) for i in range(cfg.workers))
        rejected = forged_in = honest_in = honest_sent = genuine_sent = genuine_in = 0
        reveal = hashlib.sha256(f"{cfg.task}/{cfg.seed}/reveal/{r}".encode()).hexdigest()
        new_state = dict(state)
        down = 0
        screened, verdicts = [], []
        for f, names in enumerate(frags):
            rejected += sent[f] - len(payloads[f])  # unencodable attacks
            if compressors is None:
                decoded = {k: decode_fragment(b)[0] for k, b in payloads[f].items()}
            else:
                decoded = {k: decode_payload(b, shapes[f], codec)[0] for k, b in payloads[f].items()}
            accepted, rej = screen_payloads(decoded, layouts[f], cfg.norm_multiple)
            rejected += len(rej)
            screened.append(accepted)
            verdicts.append(credit(r, f, state, names, {int(k.removeprefix("worker")): d for k, d in accepted.items()},
                                   previous[f], reveal) if credit is not None and accepted else {})
        if credit is not None:
            _audit(credit, r, reveal, state, frags, screened, verdicts, starts, cfg, ev, samplers)
        for f, names in enumerate(frags):
            accepted, credited = screened[f], None
            if credit is not None and accepted:
                credited = {f"worker{i:03d}" for i, v in verdicts[f].items() if v.credited}
                kept = credit.clipped({f"worker{i:03d}": accepted[f"worker{i:03d}"] for i, v in verdicts[f].items()
                                       if v.aggregated})
                rejected += len(accepted) - len(kept)
                accepted = kept
            elif scorer is not None and accepted:
                kept = {k: d for k, d in accepted.items()
                        if scorer.score(r, int(k.removeprefix("worker")), state, names, d) > 0.0}
                rejected += len(accepted) - len(kept)
                accepted = kept
            credited = accepted.keys() if credited is None else credited
            forged_in += len(forged & credited)
            genuine_sent += len(genuine[f])
            genuine_in += len(genuine[f] & credited)
            honest_in += len(credited - forged)
            honest_sent += sum(1 for i in honest_idx)
            aggregate = rules[f](accepted) if accepted else outers[f].zero_aggregate()
            previous[f] = aggregate
            new_frag = outers[f].step(aggregate)
            new_state.update(new_frag)
            down += len(encode_fragment(new_frag, dict(task=cfg.task, round=r, fragment=f, trainer="syncer",
                                                       dtype="float32", kind="weights")))
        state = new_state
        total_encoded += up + down
        total_tensor += 2 * tensor_bytes
        train_losses = [results[i].mean_loss for i in honest_idx]
        rounds.append({"round": r, **ev(state),
                       "train_loss": sum(train_losses) / len(train_losses) if train_losses else float("nan"),
                       "tensor_bytes_per_worker": total_tensor, "encoded_bytes_per_worker": total_encoded,
                       "upload_bytes": up, "rejected": rejected, "byzantine_accepted": forged_in,
                       "byzantine_genuine_sent": genuine_sent, "byzantine_genuine_credited": genuine_in,
                       "honest_sent": honest_sent, "honest_credited": honest_in,
                       "barred": len(credit.barred) if credit is not None else 0,
                       "honest_barred": sum(1 for i in credit.barred if i not in attackers) if credit is not None else 0,
                       "seconds": time.perf_counter() - t0})
        if log:
            log(rounds[-1])
    return SimResult(rounds, state, sum(t.numel() for t in state.values()), time.perf_counter() - t_start)


def _audit(credit: CreditGate, r: int, reveal: str, state: dict[str, Tensor], frags: list[list[str]],
           screened: list[dict[str, dict[str, Tensor]]], verdicts: list[dict[int, Verdict]], starts: dict[int, dict],
           cfg: SimConfig, ev: _Eval, samplers: list[WindowDataset]) -> None:
    """The round's audit (`CreditGate.audited`): replay each drawn trainer's round from the inner
    state it started with (``starts``) and bar it when a payload it sent does not reproduce."""
    for i in credit.audited(reveal, [i for v in verdicts for i, x in v.items() if x.credited], r):
        data = WindowDataset(ev.split, samplers[i].unique_ids, seed=0)  # its generator: from the inner state
        replayed = replay_round(cfg.model, cfg.inner, data, state, starts[i], init_seed=cfg.seed)
        sent = [(screened[f][f"worker{i:03d}"], names) for f, names in enumerate(frags) if f"worker{i:03d}" in screened[f]]
        if not all(reproduces(p, replayed, names) for p, names in sent):
            credit.bar(i, r, [v[i] for v in verdicts if i in v])


def _untouched(delta: dict[str, Tensor], own: dict[str, Tensor] | None) -> bool:
    """Whether an attacker's payload ``delta`` is its own pseudo-gradient ``own``, untouched."""
    return own is not None and delta.keys() == own.keys() and all(torch.equal(delta[n], own[n]) for n in delta)


def _probe(scorer: ShardScorer, r: int, i: int, state: dict[str, Tensor], names: list[str]):
    """Attacker i's probe of a payload of the fragment ``names`` in round r: its score on the public
    batch of its own shard (what it can compute itself before it submits)."""
    return lambda payload: scorer.score(r, i, state, names, payload)


def _inner_round(worker: InnerTrainer, state: dict[str, Tensor], previous_end: dict[str, Tensor] | None,
                 overlap: int) -> InnerResult:
    """One worker's H inner steps of a round that starts from the global weights ``state``. With
    ``overlap`` > 0 and a previous round, the first ``overlap`` steps run from the worker's own end
    weights ``previous_end`` (the global weights were not there yet), then it rebases on ``state``."""
    if not overlap or previous_end is None:
        return worker.run(state)
    return worker.finish_round([worker.run(None, steps=overlap)], previous_end, state)


def simulate_sync(cfg: SimConfig, df: pd.DataFrame | None = None, lr: float | None = None,
                  log: Callable[[dict], None] | None = None) -> SimResult:
    """Synchronous data-parallel AdamW baseline: ``rounds * H`` steps with global batch
    ``workers * batch_size`` (each worker's share from its own shard), metrics every H steps.
    ``lr`` overrides the inner learning rate (the baseline must be tuned, EVALUATION.md)."""
    t_start = time.perf_counter()
    df = default_collection() if df is None else df
    ev = _Eval(cfg, df)
    state = _initial_state(cfg)
    inner = replace(cfg.inner, lr=lr if lr is not None else cfg.inner.lr)
    samplers = _samplers(cfg, ev)
    trainer = InnerTrainer(cfg.model, replace(inner, batch_size=inner.batch_size * cfg.workers), samplers[0],
                           init_seed=cfg.seed)
    trainer.data = _Concat(samplers, inner.batch_size)
    trainer.load_global(state)
    tensor_bytes = sum(t.numel() * 4 for t in state.values())
    rounds = [{"round": 0, **ev(state), "train_loss": float("nan"), "tensor_bytes_per_worker": 0,
               "encoded_bytes_per_worker": 0, "upload_bytes": 0, "rejected": 0, "seconds": 0.0}]
    if log:
        log(rounds[-1])
    total = 0
    for r in range(1, cfg.rounds + 1):
        t0 = time.perf_counter()
        res = trainer.run(None)
        total += 2 * tensor_bytes * inner.steps
        state = res.state
        rounds.append({"round": r, **ev(state), "train_loss": res.mean_loss, "tensor_bytes_per_worker": total,
                       "encoded_bytes_per_worker": total, "upload_bytes": tensor_bytes * inner.steps, "rejected": 0,
                       "seconds": time.perf_counter() - t0})
        if log:
            log(rounds[-1])
    return SimResult(rounds, state, sum(t.numel() for t in state.values()), time.perf_counter() - t_start)


class _Concat:
    """Draws ``per_worker`` windows from each sampler and concatenates them (the global batch)."""

    def __init__(self, samplers: list[WindowDataset], per_worker: int):
        self.samplers, self.per_worker = samplers, per_worker

    def sample(self, batch_size: int) -> Tensor:
        return torch.cat([s.sample(self.per_worker) for s in self.samplers])

    def state_dict(self) -> dict:
        return {"samplers": [s.state_dict() for s in self.samplers]}

    def load_state_dict(self, state: dict) -> None:
        for s, st in zip(self.samplers, state["samplers"]):
            s.load_state_dict(st)
