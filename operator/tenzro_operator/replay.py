"""Off-chain replay of a sealed run (``tenzro train verify-receipt``).

Nothing the syncer claims is taken on trust. From the chain and IPFS alone the replay

1. reads the sealed receipt (``getReceipt``), recomputes its run root in Python and asks both the
   verifier at the TRAINING_VERIFY address (``0x…1008`` on devnets) and the normally deployed
   ``ReceiptVerifier`` for it; both must answer ``0x01``, and both must refuse a tampered root;
2. fetches the spec (checked against ``getRun.specHash``) and the round-0 weights (checked against
   ``initialWeightsRoot``), and builds the model layout;
3. checks every round from its last ``RoundCommitted`` event and transcript
   (`tenzro_operator.root_check.RootRoundChecker.replay`, contracts/PROTOCOL.md §5): the
   transcript against its hash, every accepted signed payload fetched, hashed, decoded and checked
   against its signed commitment, the aggregate and the outer Nesterov step (DiLoCo, Douillard et
   al. 2023, Alg. 1 l. 10-12) recomputed from the previous committed state, the new weights and
   momentum compared with the committed roots, and the round digest with the receipt's;
4. recomputes the transcript root, the final model hash, the serialized receipt and the run root,
   and compares them with the receipt.

Each difference is recorded as a `Mismatch` (what / expected / got); the replay goes on after
one. Every round is checked given its committed inputs, so one bad round does not hide the state
of the later ones. The live watcher (`tenzro_operator.roles.watcher`) runs the same checker on
each round as it is committed.

Encoding of hashes and roots: contracts/RECEIPT.md (v1). Transcript format: `transcript.py`.
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from tenzro_operator import receipt as rc
from tenzro_operator.chain import ChainClient, RunStatus, RunView, TrainingReceipt
from tenzro_operator.errors import ChainRevert, TenzroError
from tenzro_operator.ipfs import IpfsClient
from tenzro_operator.root_check import RootRoundChecker
from tenzro_operator.root_flow import committed_rounds
from tenzro_operator.round_report import Mismatch, RoundReport, show

__all__ = ["Mismatch", "ReplayError", "ReplayReport", "RoundReport", "verify_receipt"]

Progress = Callable[[str, int, int], None]
"""``progress(stage, done, total)``: stage is ``"receipt"`` or ``"round"``."""


class ReplayError(TenzroError):
    """The replay could not run at all (run not sealed, events missing); says what and where."""


# ----------------------------------------------------------------------------- report


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
        return {"task_id": show(self.task_id), "ok": self.ok, "run_root": show(self.run_root),
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
        t = Table(title=f"replay of {show(self.task_id)}")
        for col in ("round", "accepted", "payloads", "MiB", "seconds", "result"):
            t.add_column(col)
        for r in self.rounds:
            t.add_row(str(r.round), str(r.accepted), str(r.payloads_checked), f"{r.payload_bytes / 2**20:.2f}",
                      f"{r.seconds:.2f}", "[green]ok[/]" if r.ok else f"[red]{len(r.mismatches)} mismatch(es)[/]")
        console.print(t)
        yes = lambda b: "[green]yes[/]" if b else ("n/a" if b is None else "[red]NO[/]")  # noqa: E731
        console.print(f"run root {show(self.run_root)}; verifier 0x…1008 accepts: {yes(self.verifier_ok)}; "
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
        self.sink.append(Mismatch(what, show(expected), show(got), self.round))
        return False

    def fail(self, what: str, expected: str, got: str) -> None:
        self.sink.append(Mismatch(what, expected, got, self.round))


# ----------------------------------------------------------------------------- helpers


def _hex(b: bytes) -> str:
    return "0x" + bytes(b).hex()


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
    replayer = RootRoundChecker.for_run(chain, ipfs, task_id, run, start)
    events = committed_rounds(chain, task_id, start, run.max_rounds)
    trainers = replayer.trainers

    R = run.max_rounds
    weights_roots, transcript_hashes, digests = [], [], []
    for r in range(R):
        record = chain.get_round(task_id, r)
        receipt_digest = decoded.round_digests[r] if decoded is not None and r < decoded.rounds else None
        rep, wroot, thash, digest = replayer.replay(r, events.get(r), record, receipt_digest, check_payloads)
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
