"""One read model of a run: what ``tenzro train get-run`` / ``trainer-stats``, the explorer and
the gateway's reads show.

A run (contracts/PROTOCOL.md §5) keeps only roots in the registry's storage: its accepted
bitmaps, credits, rewards and challenges are in its events. This module folds the run's events
(``RoundOpened``, ``RoundCommitted``, ``RoundsDiscarded``, ``RoundProvenWrong``,
``SlotChallenged`` / ``SlotAnswered`` / ``SlotChallengeVoided``, ``RootRunSealed``,
``RewardClaimed``, ``PoolSwept``) with the registry's
getters (``getRun``, ``trainerMetrics``, ``getRound``, ``rootState``) into one shape, and, when
an IPFS client is given, the committed transcripts (what each trainer submitted and what scoring
left out, with the reasons).

Units: amounts in atto-units (1 TNZO = 10**18), times in unix seconds (block time), credits in
coordinates (a fragment's size per accepted fragment, as ``commitRound`` sums them).

    view = build(chain, task_id, ipfs=ipfs)       # a RunReadModel
    view.trainer("0xabc...").credits              # cumulative credits
    json.dumps(view.to_json())                    # the CLI's and the explorer's JSON
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from tenzro_operator.credits import credit_halves, credit_word, paid_credits, word
from tenzro_operator.errors import TenzroError

__all__ = ["RoundRow", "RunReadModel", "TrainerRow", "build", "fold_root_rounds", "fold_root_trainers",
           "phase_of", "quorum_met"]

# RoundProvenWrong.kind (ITrainingRegistryRounds)
PROOF_KINDS = {1: "aggregate", 2: "bitmap", 3: "omission", 4: "slot-unanswered"}
MAX_TRANSCRIPTS = 256  # committed rounds whose transcripts are read for submitted / scored-out counts
MAX_CACHED_TRANSCRIPTS = 1024  # transcripts' entries kept in memory by (CID, hash): the bytes never change
# (cid, sha256 hex) -> [(trainer lowercase, fragment, reason or None if accepted, detail)]
_TRANSCRIPTS: dict[tuple[str, str], list[tuple[str, int, str | None, str | None]]] = {}
_TRANSCRIPTS_LOCK = threading.Lock()  # the explorer serves pages from several threads


class RunViewError(TenzroError):
    """The chain's events do not fold into a consistent run (a round missing, a bitmap list of the
    wrong length)."""


@dataclass
class RoundRow:
    """One round. Times unix seconds (None: not yet), amounts atto-units.

    ``status``: ``open`` (opened, not committed), ``committed`` (a live commit), ``discarded`` (a
    fraud proof rewound the run past it and it is not committed again).
    ``challenge_window_ends_at``: the last second a proof of the round is accepted
    (``finalizedAt + challengeSeconds``)."""

    round: int
    status: str = "open"
    opened_at: int | None = None
    deadline: int | None = None
    committed_at: int | None = None
    challenge_window_ends_at: int | None = None
    accepted_count: int | None = None  # accepted (trainer, fragment) pairs
    accepted_bitmaps: list[int] | None = None  # per trainer index, bit f = accepted on fragment f
    unendorsed_bitmaps: list[int] | None = None  # per trainer index, bit f = accepted, not endorsed (empty: none)
    quorum_met: bool | None = None
    weights_root: str | None = None
    fragments_root: str | None = None
    credits_root: str | None = None
    total_credits: int | None = None  # cumulative, after this round
    transcript_cid: str | None = None
    transcript_hash: str | None = None
    tx: str | None = None
    proven_wrong: list[dict[str, Any]] = field(default_factory=list)
    challenges: list[dict[str, Any]] = field(default_factory=list)
    discarded_commits: list[dict[str, Any]] = field(default_factory=list)

    @property
    def live(self) -> bool:
        return self.status == "committed"

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["finalized"] = self.live
        d["finalized_at"] = self.committed_at
        d["seconds"] = (self.committed_at - self.opened_at) if self.committed_at and self.opened_at else None
        if self.total_credits is not None:
            d["total_credits"] = str(self.total_credits)
        return d


@dataclass
class TrainerRow:
    """One trainer. Amounts atto-units; ``submitted`` / ``scored_out``: None when unknown (a run
    read without its transcripts).

    ``credits``: every credit of its accepted submissions, ``unendorsed`` of them not endorsed by
    the syncer (PROTOCOL.md §5 "Endorsed credit"), paid only up to the endorsed (``paid_credits``).
    ``current_reward``: what the trainer's credits are worth now (sealed: its claim,
    ``claimable * paid_credits // totalCredits``; before the seal: the same share of the pool left,
    which later rounds change); ``claimed_reward``: what was paid to it (``RewardClaimed``)."""

    trainer: str
    index: int
    did: str = ""
    enrolled: bool = True
    submitted: int | None = None
    accepted: int = 0
    scored_out: int | None = None
    scored_out_reasons: list[dict[str, Any]] = field(default_factory=list)
    stake: int = 0
    slashed: int = 0
    credits: int = 0
    unendorsed: int = 0
    current_reward: int = 0
    claimed_reward: int = 0
    claimed: bool = False

    @property
    def credit_word(self) -> int:
        """The trainer's leaf value in the credits root (``claim``'s ``credits``)."""
        return word(self.credits - self.unendorsed, self.unendorsed)

    @property
    def paid_credits(self) -> int:
        """What ``claim`` pays on: the endorsed credits plus the unendorsed up to them."""
        return paid_credits(self.credit_word)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["paid_credits"] = self.paid_credits
        for k in ("stake", "slashed", "credits", "unendorsed", "paid_credits", "current_reward", "claimed_reward"):
            d[k] = str(d[k])
        return d


@dataclass
class RunReadModel:
    """A run as `build` read it at block ``head_block`` (time ``now``, seconds)."""

    task_id: bytes
    run: Any  # chain.RunView
    head_block: int
    now: int
    phase: str
    next_change_at: int | None
    next_change: str
    trainers: list[TrainerRow]
    rounds: list[RoundRow]
    total_credits: int = 0
    claimable_pool: int | None = None  # sealed: RootRunSealed.claimable, atto-units
    claim_deadline: int | None = None  # sealed, seconds
    claimed_total: int = 0
    swept: int | None = None  # PoolSwept amount, atto-units
    commit_phase_closes_at: int | None = None  # training: the open round's commit phase
    transcript_errors: list[str] = field(default_factory=list)

    def trainer(self, address: str) -> TrainerRow:
        """The row of ``address`` (any case).

        Raises:
            RunViewError: not enrolled in this run.
        """
        for t in self.trainers:
            if t.trainer.lower() == address.lower():
                return t
        raise RunViewError(f"{address} is not enrolled in run 0x{self.task_id.hex()}")

    def round(self, r: int) -> RoundRow | None:
        return next((x for x in self.rounds if x.round == r), None)

    def summary_json(self) -> dict[str, Any]:
        """The run-level figures (no trainers, no rounds)."""
        return {"phase": self.phase, "next_change_at": self.next_change_at,
                "next_change": self.next_change, "now": self.now, "head_block": self.head_block,
                "total_credits": str(self.total_credits),
                "claimable_pool": None if self.claimable_pool is None else str(self.claimable_pool),
                "claim_deadline": self.claim_deadline, "claimed_total": str(self.claimed_total),
                "swept": None if self.swept is None else str(self.swept),
                "commit_phase_closes_at": self.commit_phase_closes_at,
                "rounds_committed": sum(1 for r in self.rounds if r.live),
                "transcript_errors": list(self.transcript_errors)}

    def to_json(self, trainers: bool = True) -> dict[str, Any]:
        """What ``tenzro train get-run --format json`` prints and the gateway's ``getRun`` answers:
        the run's fields (`RunView.to_json`) at the top, the summary, ``rounds`` and (with
        ``trainers``) ``trainers``."""
        out = {**self.run.to_json(), **self.summary_json(), "rounds": [r.to_json() for r in self.rounds]}
        if trainers:
            out["trainers"] = [t.to_json() for t in self.trainers]
        return out


# ------------------------------------------------------------------------------ pure folds


def _hex(v: Any) -> str:
    return "0x" + bytes(v).hex()


def quorum_met(bitmaps: Sequence[int], fragment_count: int, quorum: int) -> bool:
    """Whether every fragment has at least ``quorum`` trainers with its bit set."""
    return all(sum(1 for b in bitmaps if int(b) >> f & 1) >= quorum for f in range(fragment_count))


def fold_root_rounds(events: Iterable[Mapping[str, Any]], block_time: Callable[[int], int], *,
                     fragment_count: int, quorum: int, challenge_seconds: int) -> dict[int, RoundRow]:
    """Rounds of a run from its events in chain order (`ChainClient.get_logs` dicts).
    ``block_time(block_number)`` gives a block's timestamp (s): a commit's time is its block's,
    as the registry's ``finalizedAt``. A later ``RoundCommitted`` of a round replaces the earlier
    one (after a rewind); ``RoundsDiscarded(from, to)`` marks rounds from..to-1 discarded and keeps
    their commits in ``discarded_commits``."""
    rounds: dict[int, RoundRow] = {}

    def row(r: int) -> RoundRow:
        return rounds.setdefault(r, RoundRow(round=r))

    for e in events:
        a, name = e["args"], e["event"]
        if name == "RoundOpened":
            x = row(int(a["round"]))
            x.opened_at, x.deadline = int(a["openedAt"]), int(a["deadline"])
        elif name == "RoundCommitted":
            x = row(int(a["round"]))
            bitmaps = [int(b) for b in a["acceptedBitmaps"]]
            at = int(block_time(int(e["block_number"])))
            x.status, x.committed_at = "committed", at
            x.challenge_window_ends_at = at + int(challenge_seconds)
            x.accepted_bitmaps = bitmaps
            x.unendorsed_bitmaps = [int(u) for u in a.get("unendorsedBitmaps") or []]
            x.accepted_count = sum(bin(b).count("1") for b in bitmaps)
            x.quorum_met = quorum_met(bitmaps, fragment_count, quorum)
            x.weights_root, x.fragments_root = _hex(a["weightsRoot"]), _hex(a["fragmentsRoot"])
            x.credits_root, x.total_credits = _hex(a["creditsRoot"]), int(a["totalCredits"])
            x.transcript_cid, x.transcript_hash = str(a["transcriptCid"]), _hex(a["transcriptHash"])
            x.tx = e["tx_hash"]
        elif name == "RoundsDiscarded":
            for r in range(int(a["fromRound"]), int(a["toRound"])):
                x = row(r)
                if x.status == "committed":
                    x.discarded_commits.append({"committed_at": x.committed_at, "weights_root": x.weights_root,
                                                "transcript_cid": x.transcript_cid, "tx": x.tx})
                x.status = "discarded"
                for k in ("committed_at", "challenge_window_ends_at", "accepted_count", "accepted_bitmaps",
                          "unendorsed_bitmaps", "quorum_met", "weights_root", "fragments_root", "credits_root",
                          "total_credits",
                          "transcript_cid", "transcript_hash", "tx"):
                    setattr(x, k, None)
        elif name == "RoundProvenWrong":
            kind = int(a["kind"])
            row(int(a["round"])).proven_wrong.append(
                {"kind": kind, "kind_name": PROOF_KINDS.get(kind, str(kind)), "fragment": int(a["fragment"]),
                 "position": int(a["position"]), "prover": a["prover"], "syncer": a["syncer"],
                 "slashed": str(int(a["slashed"])), "bounty": str(int(a["bounty"])), "tx": e["tx_hash"]})
            if kind == 4:
                _settle(row(int(a["round"])), int(a["fragment"]), int(a["position"]), "expired: round proven wrong")
        elif name == "SlotChallenged":
            row(int(a["round"])).challenges.append(
                {"fragment": int(a["fragment"]), "index": int(a["index"]), "challenger": a["challenger"],
                 "deadline": int(a["deadline"]), "bond": str(int(a["bond"])), "outcome": "pending",
                 "tx": e["tx_hash"]})
        elif name == "SlotAnswered":
            _settle(row(int(a["round"])), int(a["fragment"]), int(a["index"]), "answered")
        elif name == "SlotChallengeVoided":
            _settle(row(int(a["round"])), int(a["fragment"]), int(a["index"]), "voided: round discarded")
    return rounds


def _settle(x: RoundRow, fragment: int, index: int, outcome: str) -> None:
    for c in x.challenges:
        if c["fragment"] == fragment and c["index"] == index and c["outcome"] == "pending":
            c["outcome"] = outcome
            return


def fold_root_trainers(rounds: Mapping[int, RoundRow], sizes: Sequence[int], enrolled: int) -> list[tuple[int, int]]:
    """``(accepted fragments, credits word)`` per trainer index over the live committed rounds:
    `credits.credit_word` of each round's accepted and unendorsed bitmaps (``commitRound``'s sum).

    Raises:
        RunViewError: a live round commits another number of bitmaps than ``enrolled``.
    """
    out = [[0, 0] for _ in range(enrolled)]
    for r in sorted(rounds):
        x = rounds[r]
        if not x.live or x.accepted_bitmaps is None:
            continue
        if len(x.accepted_bitmaps) != enrolled:
            raise RunViewError(f"round {r} commits {len(x.accepted_bitmaps)} bitmaps for {enrolled} enrolled trainers")
        unendorsed = x.unendorsed_bitmaps or [0] * enrolled
        for i, (b, u) in enumerate(zip(x.accepted_bitmaps, unendorsed)):
            out[i][0] += bin(int(b)).count("1")
            out[i][1] += credit_word(b, u, sizes)
    return [(a, c) for a, c in out]


def phase_of(run, now: int, *, last_commit_at: int | None = None, claim_deadline: int | None = None,
             swept: bool = False) -> tuple[str, int | None, str]:
    """(phase, when it next changes (unix s, None: not by time), what changes). A run is
    COMPLETED until its last round's challenge window ends (``finalizedAt + challengeSeconds``),
    then sealable; sealed, its claims are open until ``claim_deadline``, then the rest is sweepable."""
    s = run.status.name
    if s == "ENROLLING":
        return s, run.enrollment_deadline or None, "enrollment closes"
    if s == "TRAINING":
        return s, run.round_deadline or None, f"round {run.current_round}'s deadline"
    if s == "COMPLETED":
        if last_commit_at is not None:
            until = last_commit_at + run.challenge_seconds
            if now <= until:
                return s, until + 1, "sealable (the last round's challenge window ends)"
        return s, None, "sealable now"
    if s == "SEALED" and claim_deadline and not swept:
        if now <= claim_deadline:
            return s, claim_deadline + 1, "claims close; the unclaimed rest can be swept to the sponsor"
        return s, None, "claims closed; the unclaimed rest can be swept to the sponsor"
    return s, None, "final"


# ------------------------------------------------------------------------------ from the chain


def build(chain, task_id: bytes, *, ipfs=None, trainers: bool = True, events: list[dict] | None = None) -> RunReadModel:
    """Read run ``task_id`` from the chain (and its transcripts from ``ipfs`` when given).

    Args:
        chain: a `ChainClient` (no key needed).
        ipfs: an `IpfsClient` or None; fills ``submitted`` / ``scored_out`` from the transcripts.
        trainers: False skips the per-trainer rows (and their getters).
        events: the run's events if the caller has them already (``get_logs(..., task_id=...)``).

    Raises:
        ChainRevert: ``Registry__UnknownTask``. RpcUnavailable: the node does not answer.
        RunViewError: the events do not fold.
    """
    run = chain.get_run(task_id)
    head = chain.block_number()
    now = chain.block_timestamp(head)
    if events is None:
        events = chain.get_logs(chain.run_start_block(run), head, task_id=task_id)
    return _build(chain, run, task_id, events, head, now, ipfs, trainers)


def _times(chain) -> Callable[[int], int]:
    cache: dict[int, int] = {}

    def block_time(b: int) -> int:
        if b not in cache:
            cache[b] = chain.block_timestamp(b)
        return cache[b]

    return block_time


def _stats(chain, task_id: bytes, want: bool) -> list:
    return [chain.trainer_stats(task_id, a) for a in chain.trainers_of(task_id)] if want else []


def _row(s) -> TrainerRow:
    return TrainerRow(trainer=s.trainer, index=s.index, did=s.did, enrolled=s.enrolled, stake=s.stake,
                      slashed=s.slashed)


def _build(chain, run, task_id, events, head, now, ipfs, want) -> RunReadModel:
    rounds = fold_root_rounds(events, _times(chain), fragment_count=run.fragment_count, quorum=run.quorum,
                              challenge_seconds=run.challenge_seconds)
    sealed = next((e["args"] for e in events if e["event"] == "RootRunSealed"), None)
    claims = {int(e["args"]["index"]): int(e["args"]["reward"]) for e in events if e["event"] == "RewardClaimed"}
    swept = sum(int(e["args"]["amount"]) for e in events if e["event"] == "PoolSwept")
    any_swept = any(e["event"] == "PoolSwept" for e in events)
    claimable = int(sealed["claimable"]) if sealed else None
    total = run.total_credits
    rows = [_row(s) for s in _stats(chain, task_id, want)]
    if rows:
        folded = fold_root_trainers(rounds, run.fragment_sizes, run.enrolled_count)
        for t in rows:
            t.accepted, word = folded[t.index] if t.index < len(folded) else (0, 0)
            endorsed, t.unendorsed = credit_halves(word)
            t.credits = endorsed + t.unendorsed
            t.submitted = None  # delivered off-chain: the transcripts say
            pool = claimable if claimable is not None else run.reward_pool_left
            t.current_reward = pool * t.paid_credits // total if total else 0
            t.claimed_reward, t.claimed = claims.get(t.index, 0), t.index in claims
    errors: list[str] = []
    if rows and ipfs is not None:
        errors = _fold_transcripts(ipfs, rounds, rows)
    live = [x for x in rounds.values() if x.live]
    last = max(live, key=lambda x: x.round) if live else None
    deadline = int(sealed["claimDeadline"]) if sealed else None
    phase, at, what = phase_of(run, now, last_commit_at=last.committed_at if last else None,
                               claim_deadline=deadline, swept=any_swept)
    closes = None
    if run.status.name == "TRAINING":
        closes = chain.commit_phase(task_id)[0]
    return RunReadModel(task_id=task_id, run=run, head_block=head, now=now, phase=phase,
                        next_change_at=at, next_change=what, trainers=rows,
                        rounds=[rounds[r] for r in sorted(rounds)], total_credits=total, claimable_pool=claimable,
                        claim_deadline=deadline, claimed_total=sum(claims.values()),
                        swept=swept if any_swept else None, commit_phase_closes_at=closes, transcript_errors=errors)


def _fold_transcripts(ipfs, rounds: Mapping[int, RoundRow], rows: list[TrainerRow]) -> list[str]:
    """Fill ``submitted`` (accepted + scored-out entries) and ``scored_out`` (with round,
    fragment, reason, detail) of each trainer from the live rounds' transcripts, each checked
    against its committed hash. Returns one line per transcript that could not be used (then the
    counts stay None)."""
    from tenzro_operator.errors import IpfsError, IpfsUnavailable
    from tenzro_operator.transcript import MAX_TRANSCRIPT_BYTES, RoundTranscript, TranscriptError

    by_addr = {t.trainer.lower(): t for t in rows}
    sub = {a: 0 for a in by_addr}
    out: dict[str, list] = {a: [] for a in by_addr}
    errors: list[str] = []
    live = [rounds[r] for r in sorted(rounds) if rounds[r].live][:MAX_TRANSCRIPTS]
    for x in live:
        key = (x.transcript_cid, x.transcript_hash)
        with _TRANSCRIPTS_LOCK:
            entries = _TRANSCRIPTS.get(key)
        if entries is None:
            try:
                t = RoundTranscript.parse(ipfs.cat(x.transcript_cid, max_bytes=MAX_TRANSCRIPT_BYTES),
                                          expected_hash=bytes.fromhex(x.transcript_hash[2:]))
            except IpfsUnavailable as exc:
                errors.append(f"transcripts not read: {exc}")  # once, not a timeout per round
                break
            except (IpfsError, TranscriptError) as exc:
                errors.append(f"round {x.round}: transcript ipfs://{x.transcript_cid}: {exc}")
                continue
            entries = [(s.trainer.lower(), fr.fragment, None, None) for fr in t.fragments for s in fr.accepted]
            entries += [(s.trainer.lower(), fr.fragment, s.reason, s.detail) for fr in t.fragments for s in fr.rejected]
            with _TRANSCRIPTS_LOCK:
                if len(_TRANSCRIPTS) >= MAX_CACHED_TRANSCRIPTS:
                    _TRANSCRIPTS.pop(next(iter(_TRANSCRIPTS)), None)
                _TRANSCRIPTS[key] = entries
        for trainer, fragment, reason, detail in entries:
            if trainer in sub:
                sub[trainer] += 1
                if reason is not None:
                    out[trainer].append({"round": x.round, "fragment": fragment, "reason": reason, "detail": detail})
    if not errors:
        for a, t in by_addr.items():
            t.submitted, t.scored_out, t.scored_out_reasons = sub[a], len(out[a]), out[a]
    return errors
