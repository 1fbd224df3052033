"""Off-chain replay of a sealed run (``tenzro train verify-receipt``).

Nothing the syncer claims is taken on trust. From the chain and IPFS alone the replay

1. reads the sealed receipt (``getReceipt``), recomputes its run root in Python and asks both the
   verifier at the TRAINING_VERIFY address (``0x…1008`` on devnets) and the normally deployed
   ``ReceiptVerifier`` for it; both must answer ``0x01``, and both must refuse a tampered root;
2. fetches the spec (checked against ``getRun.specHash``) and the round-0 weights (checked against
   ``initialWeightsRoot``), and builds the model layout (`TaskRuntime`);
3. for every round r: takes the ``RoundFinalized`` event (CIDs, hashes, accepted bitmaps,
   transcript hash and CID), fetches the transcript and checks its sha256; for every accepted
   submission the transcript lists, finds the matching ``GradientSubmitted`` event (same trainer,
   fragment and round; same CID and payloadHash), fetches the payload and checks its sha256, decodes
   and validates it; re-aggregates each fragment with the spec's rule over the accepted payloads
   ordered by lower-case trainer address, applies the outer Nesterov step (DiLoCo, Douillard et
   al. 2023, Alg. 1 l. 10-12; momentum carried across rounds from the initial weights), encodes
   the new weights (`TaskRuntime.encode_weights`) and compares every fragment's sha256, the
   weights root and the round digest with what the chain and the receipt hold;
4. recomputes the transcript root, the final model hash, the serialized receipt and the run root,
   and compares them with the receipt.

Each difference is recorded as a `Mismatch` (what / expected / got); the replay goes on after
one. When a round's committed weights differ from the recomputed ones, the replay continues from
the *committed* weights (fetched from IPFS, momentum buffers kept: they depend only on the
aggregates), so one bad round does not hide the state of the later ones: every round is checked
given its committed inputs.

The same `RoundReplayer` serves the live watcher (`tenzro_operator.roles.watcher`), which feeds it
each round as its ``RoundFinalized`` lands instead of every round of a sealed run.

A root-flow run (contracts/PROTOCOL.md §5) has no ``RoundFinalized`` or ``GradientSubmitted``
events: its rounds are checked by `tenzro_operator.root_check.RootRoundChecker.replay` from each
round's last ``RoundCommitted`` event and transcript; steps 1 and 4 are the same.

Encoding of hashes and roots: contracts/RECEIPT.md (v1). Transcript format: `transcript.py`.
"""

from __future__ import annotations

import hashlib
import io
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import torch
from eth_utils import to_checksum_address

from tenzro_operator import receipt as rc
from tenzro_operator.chain import ChainClient, RoundRecord, RunStatus, RunView, TrainingReceipt
from tenzro_operator.errors import ChainRevert, IpfsError, IpfsUnavailable, TenzroError
from tenzro_operator.ipfs import IpfsClient
from tenzro_operator.spec import TaskSpec
from tenzro_operator.task_assets import fetch_spec, initial_weights
from tenzro_operator.task_runtime import TaskRuntime, WeightsError, outer_config
from tenzro_operator.transcript import MAX_TRANSCRIPT_BYTES, RoundTranscript, TranscriptError
from tenzro_trainer.aggregation import build_rule, trainer_key, validate_payload
from tenzro_trainer.codec import decode_fragment
from tenzro_trainer.errors import AggregationError, PayloadError, PayloadRejected
from tenzro_trainer.fragments import fragment_state
from tenzro_trainer.outer import OuterOptimizer

__all__ = ["Finalized", "Mismatch", "ReplayError", "ReplayReport", "RoundReplayer", "RoundReport", "outer_config",
           "submission_of", "verify_receipt"]

Progress = Callable[[str, int, int], None]
"""``progress(stage, done, total)``: stage is ``"receipt"``, ``"round"`` or ``"payload"``."""


class ReplayError(TenzroError):
    """The replay could not run at all (run not sealed, events missing); says what and where."""


# ----------------------------------------------------------------------------- report


def _show(v: Any) -> str:
    """Hex for bytes32 and addresses; longer byte strings as their length and sha256."""
    if isinstance(v, (bytes, bytearray)):
        if len(v) > 32:
            return f"{len(v)} bytes with sha256 0x{hashlib.sha256(v).hexdigest()}"
        return "0x" + bytes(v).hex()
    return str(v)


_FRAGMENT = re.compile(r"\bfragment (\d+)\b")


@dataclass(frozen=True)
class Mismatch:
    """One check that failed: ``what`` names the value and where (round, fragment, trainer).
    ``fragment`` is the fragment ``what`` names (None: the check is about no single fragment)."""

    what: str
    expected: str
    got: str
    round: int | None = None

    @property
    def fragment(self) -> int | None:
        m = _FRAGMENT.search(self.what)
        return int(m.group(1)) if m else None

    def __str__(self) -> str:
        return f"{self.what}: expected {self.expected}, got {self.got}"

    def to_json(self) -> dict[str, Any]:
        return {"what": self.what, "expected": self.expected, "got": self.got, "round": self.round,
                "fragment": self.fragment}


@dataclass
class RoundReport:
    """The replay of one round. ``seconds`` is wall time (fetch + decode + aggregate + encode)."""

    round: int
    accepted: int = 0
    payloads_checked: int = 0
    payload_bytes: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def to_json(self) -> dict[str, Any]:
        return {"round": self.round, "ok": self.ok, "accepted": self.accepted,
                "payloads_checked": self.payloads_checked, "payload_bytes": self.payload_bytes,
                "seconds": round(self.seconds, 3), "mismatches": [m.to_json() for m in self.mismatches],
                "notes": list(self.notes)}


@dataclass
class ReplayReport:
    """What `verify_receipt` found. ``ok`` iff every check passed (no mismatch anywhere).

    Attributes:
        task_id: bytes32 task id.
        run_root: the sealed run root (32 bytes).
        verifier_ok: the verifier at the TRAINING_VERIFY address accepted (receipt, run root).
        deployed_verifier_ok: the normally deployed ReceiptVerifier accepted it (None: none recorded).
        tampered_refused: both verifiers refused the run root with its last bit flipped.
        receipt_checks: mismatches of the receipt as a whole (run root, header fields, roots).
        rounds: one `RoundReport` per round.
        payloads_checked: accepted payloads fetched, hashed and decoded (all rounds).
        seconds: wall time of the whole replay.
    """

    task_id: bytes
    run_root: bytes = b""
    verifier_ok: bool = False
    deployed_verifier_ok: bool | None = None
    tampered_refused: bool = False
    checked_payloads: bool = True
    receipt_checks: list[Mismatch] = field(default_factory=list)
    rounds: list[RoundReport] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def mismatches(self) -> list[Mismatch]:
        """Every mismatch: by round first (a round's problem usually explains the receipt's), then
        those of the receipt as a whole."""
        return [m for r in self.rounds for m in r.mismatches] + list(self.receipt_checks)

    @property
    def first_mismatch(self) -> Mismatch | None:
        return (self.mismatches or [None])[0]

    @property
    def ok(self) -> bool:
        return not self.mismatches

    @property
    def payloads_checked(self) -> int:
        return sum(r.payloads_checked for r in self.rounds)

    def to_json(self) -> dict[str, Any]:
        first = self.first_mismatch
        return {"task_id": _show(self.task_id), "ok": self.ok, "run_root": _show(self.run_root),
                "verifier_ok": self.verifier_ok, "deployed_verifier_ok": self.deployed_verifier_ok,
                "tampered_root_refused": self.tampered_refused, "checked_payloads": self.checked_payloads,
                "payloads_checked": self.payloads_checked, "seconds": round(self.seconds, 3),
                "first_mismatch": first.to_json() if first else None,
                "receipt_mismatches": [m.to_json() for m in self.receipt_checks],
                "rounds": [r.to_json() for r in self.rounds]}

    def render(self, console=None) -> None:
        """Print a rich table per round and the verdict to ``console`` (a rich Console)."""
        from rich.console import Console
        from rich.table import Table

        console = console or Console()
        t = Table(title=f"replay of {_show(self.task_id)}")
        for col in ("round", "accepted", "payloads", "MiB", "seconds", "result"):
            t.add_column(col)
        for r in self.rounds:
            t.add_row(str(r.round), str(r.accepted), str(r.payloads_checked), f"{r.payload_bytes / 2**20:.2f}",
                      f"{r.seconds:.2f}", "[green]ok[/]" if r.ok else f"[red]{len(r.mismatches)} mismatch(es)[/]")
        console.print(t)
        yes = lambda b: "[green]yes[/]" if b else ("n/a" if b is None else "[red]NO[/]")  # noqa: E731
        console.print(f"run root {_show(self.run_root)}; verifier 0x…1008 accepts: {yes(self.verifier_ok)}; "
                      f"deployed verifier accepts: {yes(self.deployed_verifier_ok)}; "
                      f"tampered root refused: {yes(self.tampered_refused)}")
        for r in self.rounds:
            for n in r.notes:
                console.print(f"[yellow]note[/] {n}")
        for m in self.mismatches:
            console.print(f"[red]mismatch[/] {m}")
        if self.ok:
            console.print(f"[green]receipt verified by replay[/] ({self.payloads_checked} payloads, "
                          f"{self.seconds:.1f} s)")
        else:
            console.print(f"[red]receipt NOT verified[/]: first mismatch: {self.first_mismatch}")

    def __str__(self) -> str:
        from rich.console import Console

        buf = io.StringIO()
        self.render(Console(file=buf, width=120, soft_wrap=True, force_terminal=False, color_system=None))
        return buf.getvalue().rstrip("\n")


class _Checks:
    """Collects mismatches of one scope (a round or the receipt)."""

    def __init__(self, sink: list[Mismatch], round_index: int | None = None) -> None:
        self.sink, self.round = sink, round_index

    def eq(self, what: str, expected: Any, got: Any) -> bool:
        if expected == got:
            return True
        self.sink.append(Mismatch(what, _show(expected), _show(got), self.round))
        return False

    def fail(self, what: str, expected: str, got: str) -> None:
        self.sink.append(Mismatch(what, expected, got, self.round))


# ----------------------------------------------------------------------------- helpers


def _hex(b: bytes) -> str:
    return "0x" + bytes(b).hex()


@dataclass
class Finalized:
    """A ``RoundFinalized`` event: what the syncer committed for one round."""

    round: int
    weights_root: bytes
    accepted_count: int
    fragment_hashes: list[bytes]
    fragment_cids: list[str]
    accepted_bitmaps: list[int]
    transcript_hash: bytes
    transcript_cid: str

    @classmethod
    def from_event(cls, ev: Mapping[str, Any]) -> "Finalized":
        """From a decoded ``RoundFinalized`` event (`ChainClient.get_logs` / `EventCursor` shape)."""
        a, c = ev["args"], ev["args"]["commit"]
        return cls(int(a["round"]), bytes(a["weightsRoot"]), int(a["acceptedCount"]),
                   [bytes(h) for h in c["fragmentHashes"]], list(c["fragmentCids"]),
                   [int(x) for x in c["acceptedBitmaps"]], bytes(c["transcriptHash"]), str(c["transcriptCid"]))


def _finalized_events(chain: ChainClient, task_id: bytes, from_block: int, to_block: int) -> dict[int, Finalized]:
    """``round -> RoundFinalized`` of the task in ``[from_block, to_block]``."""
    out: dict[int, Finalized] = {}
    for ev in chain.get_logs(from_block, to_block, ["RoundFinalized"], task_id=task_id):
        fin = Finalized.from_event(ev)
        out[fin.round] = fin
    return out


def _submissions(chain: ChainClient, task_id: bytes, from_block: int,
                 to_block: int) -> dict[tuple[int, int, str], tuple[str, bytes]]:
    """``(round, fragment, lower-case trainer) -> (cid, payloadHash)`` of every GradientSubmitted."""
    out: dict[tuple[int, int, str], tuple[str, bytes]] = {}
    for ev in chain.get_logs(from_block, to_block, ["GradientSubmitted"], task_id=task_id):
        key, value = submission_of(ev)
        out[key] = value
    return out


def submission_of(ev: Mapping[str, Any]) -> tuple[tuple[int, int, str], tuple[str, bytes]]:
    """``((round, fragment, lower-case trainer), (cid, payloadHash))`` of a decoded
    ``GradientSubmitted`` event: the form `RoundReplayer.submissions` holds."""
    a = ev["args"]
    return (int(a["round"]), int(a["fragment"]), str(a["trainer"]).lower()), (str(a["cid"]), bytes(a["payloadHash"]))


def _fetch(ipfs: IpfsClient, cid: str, max_bytes: int) -> tuple[bytes | None, str]:
    """Bytes at ``cid`` (verified against the CID), or (None, why) when the node cannot give them
    (unknown or invalid CID, more than ``max_bytes`` bytes: cut off once the cap is passed, never
    read whole; bytes that do not match the CID). ``max_bytes`` is what the read can legitimately
    be: `TaskRuntime.payload_cap` for a payload or weights blob, `MAX_TRANSCRIPT_BYTES` for a
    transcript. `IpfsUnavailable` (no node answers) propagates: the replay cannot go on without IPFS."""
    try:
        return ipfs.cat(cid, max_bytes=max_bytes), ""
    except IpfsUnavailable:
        raise
    except IpfsError as exc:  # IpfsNotFound, IpfsIntegrityError, an invalid CID string, ...
        return None, str(exc)


# ----------------------------------------------------------------------------- the replay


def _check_receipt(chain: ChainClient, rec: TrainingReceipt, run: RunView, task_id: bytes,
                   report: ReplayReport) -> rc.Receipt | None:
    """Step 1: the receipt's bytes, its run root, and both verifiers' answers."""
    chk = _Checks(report.receipt_checks)
    try:
        decoded = rc.decode_receipt(rec.serialized)
    except rc.ReceiptFormatError as exc:
        chk.fail("serialized receipt", "a well-formed v1 receipt", str(exc))
        return None
    chk.eq("receipt run root (recomputed from the serialized bytes)", rec.run_root, rc.run_root(rec.serialized))
    chk.eq("receipt task id", task_id, decoded.task_id)
    chk.eq("receipt struct task id", task_id, rec.task_id)
    chk.eq("receipt chain id", chain.chain_id, decoded.chain_id)
    chk.eq("receipt struct chain id", chain.chain_id, rec.chain_id)
    chk.eq("receipt registry", chain.registry.address.lower(), decoded.registry_address)
    chk.eq("receipt spec hash", run.spec_hash, decoded.spec_hash)
    for name, field_ in (("spec hash", "spec_hash"), ("final model hash", "final_model_hash"),
                         ("transcript root", "transcript_root"), ("trainer count", "trainer_count")):
        chk.eq(f"receipt struct {name} vs serialized", getattr(decoded, field_), getattr(rec, field_))
    chk.eq("receipt struct rounds vs serialized", decoded.rounds, rec.rounds)
    chk.eq("receipt rounds vs the run's max rounds", run.max_rounds, decoded.rounds)

    report.verifier_ok = chain.verify_receipt(rec.serialized, rec.run_root)
    chk.eq(f"verifier at {chain.deployment.verifier_address} answer", "0x01",
           "0x01" if report.verifier_ok else "0x00")
    tampered = bytes(rec.run_root[:-1]) + bytes([rec.run_root[-1] ^ 1])
    refused = not chain.verify_receipt(rec.serialized, tampered)
    deployed = chain.deployment.contracts.get("ReceiptVerifier")
    if deployed is not None and deployed.address != chain.deployment.verifier_address:
        report.deployed_verifier_ok = chain.verify_receipt(rec.serialized, rec.run_root, address=deployed.address)
        chk.eq(f"deployed ReceiptVerifier at {deployed.address} answer", "0x01",
               "0x01" if report.deployed_verifier_ok else "0x00")
        refused = refused and not chain.verify_receipt(rec.serialized, tampered, address=deployed.address)
    report.tampered_refused = refused
    chk.eq("verifier answer for a tampered run root", "0x00", "0x00" if refused else "0x01")
    return decoded


class RoundReplayer:
    """Replays one run's rounds in order; holds the outer optimizers (one per fragment) across
    rounds. `verify_receipt` feeds it every round of a sealed run; the watcher
    (`tenzro_operator.roles.watcher`) feeds it each round as it is finalized, so the replay is
    incremental: ``submissions`` must hold round r's ``GradientSubmitted`` events (`add_submission`)
    before `replay` is called for round r, and rounds come in order 0, 1, 2, ...

    Usage::

        rp = RoundReplayer.for_run(chain, ipfs, task_id, chain.get_run(task_id))
        for ev in gradient_submitted_events: rp.add_submission(ev)
        report, *_ = rp.replay(r, Finalized.from_event(round_finalized_event), chain.get_round(task_id, r))
    """

    def __init__(self, chain: ChainClient, ipfs: IpfsClient, task_id: bytes, spec: TaskSpec,
                 runtime: TaskRuntime, state: Mapping[str, torch.Tensor], input_root: bytes,
                 trainers: list[str], submissions: dict, check_payloads: bool, progress: Progress | None) -> None:
        self.chain, self.ipfs, self.task_id, self.spec, self.runtime = chain, ipfs, task_id, spec, runtime
        self.trainers = [t.lower() for t in trainers]
        self.index = {t: i for i, t in enumerate(self.trainers)}  # address -> enrollment index
        self.submissions, self.check_payloads, self.progress = submissions, check_payloads, progress
        self.rule_name, self.rule_params = spec.aggregation_name, spec.aggregation_params
        self.outer_cfg = outer_config(spec)
        self.outers = [OuterOptimizer(fragment_state(state, names), self.outer_cfg) for names in runtime.fragments]
        self.input_root = input_root

    @classmethod
    def for_run(cls, chain: ChainClient, ipfs: IpfsClient, task_id: bytes, run: RunView, *,
                submissions: dict | None = None, check_payloads: bool = True, progress: Progress | None = None,
                max_params: int | None = None) -> "RoundReplayer":
        """A replayer at round 0 of ``run``: its spec (checked against ``specHash``), model layout,
        initial weights (checked against ``initialWeightsRoot``) and trainers (``trainersOf``,
        fixed once the run trains).

        Args:
            submissions: ``(round, fragment, trainer) -> (cid, payloadHash)`` (`submission_of`);
                None: an empty dict, filled with `add_submission`.
            max_params: largest model to build (None: `TaskRuntime`'s default).
        Raises:
            AssetError / WeightsError: the spec or the initial weights do not match their commitments.
            RpcUnavailable / IpfsUnavailable: the chain or the IPFS node does not answer.
        """
        spec = fetch_spec(ipfs, run.spec_cid, run.spec_hash)
        runtime = TaskRuntime.from_spec(spec) if max_params is None else TaskRuntime.from_spec(spec,
                                                                                             max_params=max_params)
        state, _ = initial_weights(ipfs, spec, runtime, run.initial_weights_root)
        return cls(chain, ipfs, task_id, spec, runtime, state, run.initial_weights_root, chain.trainers_of(task_id),
                   {} if submissions is None else submissions, check_payloads, progress)

    def add_submission(self, ev: Mapping[str, Any]) -> None:
        """Record a decoded ``GradientSubmitted`` event (idempotent: an event seen twice does no harm)."""
        key, value = submission_of(ev)
        self.submissions[key] = value

    # -- one round ---------------------------------------------------------------------------

    def replay(self, r: int, fin: Finalized | None, record: RoundRecord,
               receipt_digest: bytes | None) -> tuple[RoundReport, bytes, bytes, bytes]:
        """Check round r against its ``RoundFinalized`` event ``fin``, its ``getRound`` record and
        the receipt's digest; returns (report, recomputed weights root, transcript hash, recomputed
        round digest with the record's challenge status folded in, as the receipt carries it).
        With ``check_payloads`` the weights root is recomputed from the payloads, else it is the
        committed one."""
        t0 = time.perf_counter()
        rep = RoundReport(r)
        chk = _Checks(rep.mismatches, r)
        if fin is None:
            chk.fail(f"round {r} RoundFinalized event", "one event", "none found")
            rep.seconds = time.perf_counter() - t0
            return rep, record.weights_root, record.transcript_hash, record.round_digest
        F = len(self.runtime.fragments)
        chk.eq(f"round {r} event weights root vs getRound", record.weights_root, fin.weights_root)
        chk.eq(f"round {r} event transcript hash vs getRound", record.transcript_hash, fin.transcript_hash)
        chk.eq(f"round {r} event accepted count vs getRound", record.accepted_count, fin.accepted_count)
        chk.eq(f"round {r} committed fragment count", F, len(fin.fragment_hashes))
        chk.eq(f"round {r} committed weights root vs its fragment hashes", fin.weights_root,
               rc.weights_root(fin.fragment_hashes) if fin.fragment_hashes else b"")

        # The transcript.
        transcript_hash = fin.transcript_hash
        tr = None
        raw, why = _fetch(self.ipfs, fin.transcript_cid, MAX_TRANSCRIPT_BYTES)
        if raw is None:
            chk.fail(f"round {r} transcript {fin.transcript_cid}", "retrievable from IPFS", why)
        else:
            transcript_hash = hashlib.sha256(raw).digest()
            if chk.eq(f"round {r} transcript sha256", fin.transcript_hash, transcript_hash):
                try:
                    tr = RoundTranscript.parse(raw)
                except TranscriptError as exc:
                    chk.fail(f"round {r} transcript", "a valid transcript JSON", str(exc))
        accepted_sets: list[list[tuple[str, str, str]]] = [[] for _ in range(F)]
        rejected_sets: list[list[tuple[str, str]]] = [[] for _ in range(F)]  # (trainer, reason)
        if tr is not None:
            self._check_transcript_fields(chk, r, tr, fin)
            for fr in tr.fragments:
                if 0 <= fr.fragment < F:
                    accepted_sets[fr.fragment] = [(s.trainer.lower(), s.cid, s.sha256.lower()) for s in fr.accepted]
                    rejected_sets[fr.fragment] = [(s.trainer.lower(), s.reason) for s in fr.rejected]
        accepted_count = sum(len(s) for s in accepted_sets) if tr is not None else record.accepted_count
        rep.accepted = accepted_count
        chk.eq(f"round {r} accepted count (transcript) vs getRound", record.accepted_count, accepted_count)

        # Accepted bitmaps: transcript vs the commit vs the registry's own per-trainer bitmaps.
        if tr is not None:
            want = [0] * len(self.trainers)
            for f, subs in enumerate(accepted_sets):
                for trainer, _, _ in subs:
                    if trainer in self.trainers:
                        want[self.trainers.index(trainer)] |= 1 << f
                    else:
                        chk.fail(f"round {r} fragment {f} accepted trainer {trainer}", "an enrolled trainer",
                                 "not enrolled in this run")
            chk.eq(f"round {r} accepted bitmaps (commit vs transcript)", want, fin.accepted_bitmaps)
            # Rejections the syncer reported on-chain (all but "Unavailable", which is not slashed).
            want_rej = [0] * len(self.trainers)
            for f, rejs in enumerate(rejected_sets):
                for trainer, reason in rejs:
                    if trainer in {a for a, _, _ in accepted_sets[f]}:
                        chk.fail(f"round {r} fragment {f} trainer {trainer}", "accepted or rejected",
                                 "both accepted and rejected")
                    if trainer in self.trainers and reason != "Unavailable":
                        want_rej[self.trainers.index(trainer)] |= 1 << f
            for i, t in enumerate(self.trainers):
                _, rejected, accepted = self.chain.submissions_of(self.task_id, r, to_checksum_address(t))
                chk.eq(f"round {r} trainer {t} accepted bitmap (submissionsOf vs transcript)", want[i], accepted)
                chk.eq(f"round {r} trainer {t} rejected bitmap (submissionsOf vs transcript)", want_rej[i], rejected)

        # Re-aggregate, outer step, encode.
        if self.check_payloads and tr is not None:
            new_hashes = self._recompute(r, rep, chk, accepted_sets, rejected_sets)
            for f in range(min(F, len(fin.fragment_hashes))):
                if not chk.eq(f"round {r} fragment {f} weights sha256 (recomputed vs committed)",
                              fin.fragment_hashes[f], new_hashes[f]):
                    self._resync(r, f, fin, chk)
            weights_root = rc.weights_root(new_hashes)
            chk.eq(f"round {r} weights root (recomputed vs getRound)", record.weights_root, weights_root)
        else:
            weights_root = fin.weights_root
            if self.check_payloads:  # the round could not be replayed: go on from what was committed
                for f in range(min(F, len(fin.fragment_hashes))):
                    self._resync(r, f, fin, chk)
        digest = rc.round_digest(r, weights_root, transcript_hash, accepted_count)
        chk.eq(f"round {r} round digest (recomputed vs getRound)", record.round_digest, digest)
        digest = rc.with_status(digest, record.challenge_status)  # as the receipt carries it
        if receipt_digest is not None:
            chk.eq(f"round {r} round digest (recomputed vs receipt)", receipt_digest, digest)
        self.input_root = fin.weights_root
        rep.seconds = time.perf_counter() - t0
        return rep, weights_root, transcript_hash, digest

    def _check_transcript_fields(self, chk: _Checks, r: int, tr: RoundTranscript, fin: Finalized) -> None:
        """The transcript against the commit and the GradientSubmitted events (no payload fetched)."""
        tid = _hex(self.task_id)
        if tr.task_id.lower() != tid and tr.task_id != self.spec.task_id:
            chk.fail(f"round {r} transcript task_id", f"{tid} or {self.spec.task_id!r}", tr.task_id)
        chk.eq(f"round {r} transcript round", r, tr.round)
        chk.eq(f"round {r} transcript input weights root", _hex(self.input_root), tr.input_weights_root.lower())
        chk.eq(f"round {r} transcript weights root vs committed", _hex(fin.weights_root), tr.weights_root.lower())
        chk.eq(f"round {r} transcript accepted_count vs committed", fin.accepted_count, tr.accepted_count)
        name = tr.rule.get("name") if isinstance(tr.rule, dict) else None
        if name is not None:
            chk.eq(f"round {r} transcript aggregation rule", repr(build_rule(self.rule_name, self.rule_params)),
                   _rule_repr(str(name), tr.rule.get("params")))
        for k in ("lr", "momentum", "nesterov"):
            if isinstance(tr.outer, dict) and k in tr.outer:
                chk.eq(f"round {r} transcript outer {k}", getattr(self.outer_cfg, k), tr.outer[k])
        frags = sorted(fr.fragment for fr in tr.fragments)
        chk.eq(f"round {r} transcript fragments", list(range(len(self.runtime.fragments))), frags)
        for fr in tr.fragments:
            f = fr.fragment
            if not 0 <= f < len(fin.fragment_hashes):
                continue
            chk.eq(f"round {r} fragment {f} transcript weights cid vs committed", fin.fragment_cids[f], fr.weights.cid)
            chk.eq(f"round {r} fragment {f} transcript weights sha256 vs committed", _hex(fin.fragment_hashes[f]),
                   fr.weights.sha256.lower())
            chk.eq(f"round {r} fragment {f} transcript 'aggregated' flag", bool(fr.accepted), fr.aggregated)
            for s in [*fr.accepted, *fr.rejected]:
                key = (r, f, s.trainer.lower())
                posted = self.submissions.get(key)
                if posted is None:
                    chk.fail(f"round {r} fragment {f} trainer {s.trainer} GradientSubmitted event",
                             "an on-chain submission", "none")
                    continue
                chk.eq(f"round {r} fragment {f} trainer {s.trainer} cid (transcript vs GradientSubmitted)",
                       posted[0], s.cid)
                chk.eq(f"round {r} fragment {f} trainer {s.trainer} payloadHash (transcript vs GradientSubmitted)",
                       _hex(posted[1]), s.sha256.lower())

    def _recompute(self, r: int, rep: RoundReport, chk: _Checks, accepted_sets: list[list[tuple[str, str, str]]],
                   rejected_sets: list[list[tuple[str, str]]]) -> list[bytes]:
        """Fetch + check + decode the accepted payloads, aggregate, outer step, encode; F sha256s.
        Also re-checks every rejection the transcript claims (see `_check_rejections`)."""
        rule = build_rule(self.rule_name, self.rule_params)
        total = sum(len(s) for s in accepted_sets)
        for f, subs in enumerate(accepted_sets):
            updates: dict[str, dict[str, torch.Tensor]] = {}
            norms: list[float] = []
            for trainer, _, _ in sorted(subs):
                posted = self.submissions.get((r, f, trainer))
                if posted is None:
                    continue  # reported by the transcript checks
                cid, payload_hash = posted
                raw, why = _fetch(self.ipfs, cid, self.runtime.payload_cap(f))
                rep.payloads_checked += 1
                if self.progress:
                    self.progress("payload", rep.payloads_checked, total)
                where = f"round {r} fragment {f} trainer {trainer} payload {cid}"
                if raw is None:
                    chk.fail(where, "retrievable from IPFS", why)
                    continue
                rep.payload_bytes += len(raw)
                # A syncer must not accept it; still aggregated below, as the syncer presumably did.
                chk.eq(f"{where} sha256 vs payloadHash", payload_hash, hashlib.sha256(raw).digest())
                verdict, tensors, norm = self._judge(raw, r, f)
                if verdict is not None:
                    chk.fail(where, "a valid pseudo-gradient payload", verdict[1])
                    continue
                updates[trainer_key(self.index[trainer.lower()])] = tensors  # posted: so enrolled
                norms.append(norm)
            self._check_rejections(r, f, rep, chk, rejected_sets[f], norms)
            try:  # PROTOCOL.md section 1: trainer-index order; +0 for a fragment without any accepted
                self.outers[f].step(rule(updates) if updates else self.outers[f].zero_aggregate())
            except AggregationError as exc:
                chk.fail(f"round {r} fragment {f} aggregation ({rule!r})", "success", str(exc))
        state: dict[str, torch.Tensor] = {}
        for o in self.outers:
            state.update(o.weights())
        return [hashlib.sha256(b).digest() for b in self.runtime.encode_weights(state, r)]

    def _judge(self, raw: bytes, r: int, f: int) -> tuple[tuple[str, str] | None, dict | None, float]:
        """Structural check of one payload of round r, fragment f, as the syncer does it (decode;
        metadata kind / round / fragment; names, shapes, dtype, finiteness): ``(None, tensors,
        L2 norm)`` when valid, else ``((SlashReason name, detail), None, nan)`` with Malformed or
        NonFinite."""
        try:
            tensors, meta = self.runtime.decode_payload(raw, f)  # under the task's codec
            want = {"kind": "pseudo_gradient", "round": str(r), "fragment": str(f)}
            bad = {k: meta.get(k) for k, v in want.items() if meta.get(k) != v}
            if bad:
                raise PayloadError(f"payload metadata {bad} does not match {want}")
            return None, tensors, validate_payload(tensors, self.runtime.layouts[f])
        except PayloadError as exc:
            return ("Malformed", str(exc)), None, float("nan")
        except PayloadRejected as exc:
            return ("NonFinite" if exc.reason == "non_finite" else "Malformed", str(exc)), None, float("nan")

    def _check_rejections(self, r: int, f: int, rep: RoundReport, chk: _Checks, rejected: list[tuple[str, str]],
                          accepted_norms: list[float]) -> None:
        """Confirm each rejection the transcript claims from the payload itself: HashMismatch (the
        bytes at the CID do not hash to payloadHash), Malformed, NonFinite, NormOutlier (norm above
        ``norm_multiple`` x the median norm of the structurally valid payloads of the fragment, as in
        `tenzro_trainer.aggregation.screen_payloads`). "Unavailable" is settled on-chain (an availability
        challenge the trainer answered or let expire, PROTOCOL.md §4) and not re-checked here."""
        outliers: list[tuple[str, float]] = []
        for trainer, reason in sorted(rejected):
            posted = self.submissions.get((r, f, trainer))
            if reason == "Unavailable" or posted is None:
                continue
            where = f"round {r} fragment {f} trainer {trainer} rejection {reason!r}"
            raw, why = _fetch(self.ipfs, posted[0], self.runtime.payload_cap(f))
            if raw is None:
                rep.notes.append(f"{where}: payload {posted[0]} not retrievable, claim not checked ({why})")
                continue
            hash_ok = hashlib.sha256(raw).digest() == posted[1]
            verdict, _, norm = self._judge(raw, r, f)
            if reason == "HashMismatch":
                if hash_ok:
                    chk.fail(where, "payload bytes that do not hash to payloadHash", "bytes that do")
            elif reason in ("Malformed", "NonFinite"):
                if verdict is None or verdict[0] != reason:
                    chk.fail(where, f"a {reason} payload", "a valid payload" if verdict is None else verdict[1])
            elif reason == "NormOutlier":
                if verdict is not None:
                    chk.fail(where, "a well-formed payload with a large norm", verdict[1])
                else:
                    outliers.append((trainer, norm))
        if outliers:
            norms = sorted(accepted_norms + [n for _, n in outliers])
            med = float(torch.tensor(norms, dtype=torch.float64).median())
            bound = self.spec.require_protocol().norm_multiple * med
            for trainer, norm in outliers:
                if not norm > bound:
                    chk.fail(f"round {r} fragment {f} trainer {trainer} rejection 'NormOutlier'",
                             f"L2 norm > {bound:.6g}", f"{norm:.6g}")

    def _resync(self, r: int, f: int, fin: Finalized, chk: _Checks) -> None:
        """Continue fragment f from the committed weights (momentum kept), if they can be fetched."""
        raw, why = _fetch(self.ipfs, fin.fragment_cids[f], self.runtime.payload_cap(f))
        if raw is None:
            chk.fail(f"round {r} fragment {f} committed weights {fin.fragment_cids[f]}", "retrievable", why)
            return
        try:
            tensors, _ = decode_fragment(raw)
            if hashlib.sha256(raw).digest() != fin.fragment_hashes[f]:
                raise WeightsError("bytes at the committed CID do not hash to the committed sha256")
            validate_payload(tensors, self.runtime.layouts[f])
        except (PayloadError, PayloadRejected, WeightsError) as exc:
            chk.fail(f"round {r} fragment {f} committed weights", "decodable fp32 weights", str(exc))
            return
        opt = self.outers[f]
        with torch.no_grad():
            for n, p in zip(opt.names, opt.params):
                p.copy_(tensors[n])


def _rule_repr(name: str, params: Any) -> str:
    """``repr`` of the rule a transcript names (its name and parameters), or the name if unknown."""
    try:
        return repr(build_rule(name, params if isinstance(params, dict) else None))
    except AggregationError:
        return f"{name}({params})"


def verify_receipt(chain: ChainClient, ipfs: IpfsClient, task_id: bytes, *, check_payloads: bool = True,
                   progress: Progress | None = None, from_block: int | None = None) -> ReplayReport:
    """Replay a sealed run off-chain and check its receipt (see the module docstring).

    Args:
        chain: a `ChainClient` (read-only is enough).
        ipfs: an `IpfsClient` of a node that has the run's spec, weights, transcripts and payloads.
        task_id: the bytes32 task id.
        check_payloads: fetch every accepted payload and recompute the weights (the full replay);
            False checks only the commitments (transcripts, bitmaps, digests, roots).
        progress: optional ``progress(stage, done, total)`` callback.
        from_block: first block to search for events (default `ChainClient.run_start_block`,
            where the run was posted).
    Returns:
        a `ReplayReport`; ``report.ok`` is False when anything differs (``report.first_mismatch``).
    Raises:
        ReplayError: the run does not exist or is not sealed (no receipt yet).
        RpcUnavailable / IpfsUnavailable: the chain or the IPFS node does not answer (after retries).
        AssetError / WeightsError: the spec or the initial weights do not match their commitments.
    """
    t0 = time.perf_counter()
    task_id = bytes(task_id)
    report = ReplayReport(task_id, checked_payloads=check_payloads)
    try:
        run = chain.get_run(task_id)
    except ChainRevert as exc:
        if exc.error_name == "Registry__UnknownTask":
            raise ReplayError(f"no run with task id {_hex(task_id)} on this registry") from None
        raise
    if run.status != RunStatus.SEALED:
        raise ReplayError(f"run {_hex(task_id)} is {run.status.name}, not SEALED: there is no receipt to verify "
                          f"yet (round {run.current_round} of {run.max_rounds})")
    rec = chain.get_receipt(task_id)
    report.run_root = rec.run_root
    if progress:
        progress("receipt", 0, 1)
    decoded = _check_receipt(chain, rec, run, task_id, report)
    if progress:
        progress("receipt", 1, 1)

    start = chain.run_start_block(run) if from_block is None else from_block
    end = chain.block_number()
    if chain.is_root_flow(task_id):  # rounds committed by root: checked from their committed inputs
        from tenzro_operator.root_check import RootRoundChecker
        from tenzro_operator.root_flow import committed_rounds

        replayer = RootRoundChecker.for_run(chain, ipfs, task_id, run, start)
        events = committed_rounds(chain, task_id, start, run.max_rounds)
        replay_round = lambda r, record, d: replayer.replay(r, events.get(r), record, d, check_payloads)  # noqa: E731
    else:
        finalized = _finalized_events(chain, task_id, start, end)
        replayer = RoundReplayer.for_run(chain, ipfs, task_id, run,
                                         submissions=_submissions(chain, task_id, start, end),
                                         check_payloads=check_payloads, progress=progress)
        replay_round = lambda r, record, d: replayer.replay(r, finalized.get(r), record, d)  # noqa: E731
    trainers = replayer.trainers

    R = run.max_rounds
    weights_roots, transcript_hashes, digests = [], [], []
    for r in range(R):
        record = chain.get_round(task_id, r)
        receipt_digest = decoded.round_digests[r] if decoded is not None and r < decoded.rounds else None
        rep, wroot, thash, digest = replay_round(r, record, receipt_digest)
        report.rounds.append(rep)
        weights_roots.append(wroot)
        transcript_hashes.append(thash)
        digests.append(digest)
        if progress:
            progress("round", r + 1, R)

    # Step 4: the roots and the receipt as a whole, recomputed.
    chk = _Checks(report.receipt_checks)
    t_root = rc.transcript_root(transcript_hashes)
    chk.eq("transcript root (recomputed vs receipt)", rec.transcript_root, t_root)
    chk.eq("final model hash (recomputed vs receipt)", rec.final_model_hash, weights_roots[-1])
    chk.eq("trainer count (trainersOf vs receipt)", len(trainers), rec.trainer_count)
    rebuilt = rc.encode_receipt(chain_id=chain.chain_id, registry=chain.registry.address, task_id=task_id,
                                spec_hash=run.spec_hash, final_model_hash=weights_roots[-1], transcript_root=t_root,
                                trainer_count=len(trainers), round_digests=digests)
    chk.eq("run root (recomputed by replay vs receipt)", rec.run_root, rc.run_root(rebuilt))
    chk.eq("serialized receipt (recomputed by replay vs getReceipt)", rec.serialized, rebuilt)
    report.seconds = time.perf_counter() - t0
    return report
