"""Check a root-flow round from its committed inputs and build the fraud proof that convicts a
wrong one (contracts/PROTOCOL.md §5 challenges 1 and 5, §6 encodings): what a watcher runs on
each ``RoundCommitted``.

0. every forced submission live on-chain in the round (``submissionsOf``) must have its bit in
   the committed bitmaps, else `RootCheck.proof` is ``proveOmission``'s four arguments;

A round r is checked *given its committed inputs*, so a lie is found in the round that told it:

1. the round's transcript (named and hashed by the event) gives each fragment's accepted signed
   structs and the pinned new weights and momentum; their §6 leaves must give the event's
   fragments root (else the syncer published something other than what it committed: no
   aggregate proof can open it, the slot challenge is the remedy, reported as unprovable);
2. the previous state is round r - 1's committed weights and momentum (its transcript), or the
   spec's initial weights with momentum +0 for round 0;
3. each accepted payload is fetched (byte cap), hashed and decoded; its §2 commitment must be
   the signed one; the rule (``tenzro_trainer.canonical``, inputs in trainer-index order, +0 for a
   fragment with none) and the outer step are recomputed from the previous committed values;
4. the first coordinate whose committed weight or momentum differs bit-for-bit is opened:
   `RootCheck.proof` is ``proveAggregate``'s three arguments (round claim, opening, signatures).

`RootRoundChecker.replay` adds what ``tenzro train verify-receipt`` checks of a sealed round: the
event's weights root against the transcript's weights, the accepted bitmaps against the
transcript's accepted sets, the registry's record and the round digest (with its challenge
status) against the receipt's.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass
from typing import Any, Mapping

import torch

from tenzro_operator import receipt
from tenzro_operator.errors import IpfsError, IpfsUnavailable, TenzroError
from tenzro_operator.round_report import Mismatch, RoundReport
from tenzro_operator.root_flow import committed_rounds, fragment_vectors
from tenzro_operator.task_assets import initial_weights
from tenzro_operator.task_runtime import TaskRuntime, outer_config
from tenzro_operator.transcript import MAX_TRANSCRIPT_BYTES, RoundTranscript
from tenzro_operator.whole_answer import answered_vector
from tenzro_trainer import canonical
from tenzro_trainer import round_commitment as rc
from tenzro_trainer.codec import decode_fragment
from tenzro_trainer.commitment import ChunkTree, flatten_fragment
from tenzro_trainer.errors import PayloadError

__all__ = ["NotTheSignedPayload", "RootCheck", "RootRoundChecker"]

log = logging.getLogger("tenzro.watcher")

ZERO_ROOTS = (bytes(32), bytes(32), 0, bytes(32))


@dataclass
class RootCheck:
    """The outcome of checking one committed root-flow round.

    Attributes:
        round: r. ok: the committed state is the recomputation's, bit for bit, and no live
            forced submission is left out.
        fragment / coordinate: the first difference (None when ok or unprovable); for an
            omission, the fragment and the trainer index left out.
        detail: what differs, for the log and the report.
        proof: the arguments of ``proveAggregate`` ``(claim, opening, signatures)``, or for
            ``kind == "omission"`` of ``proveOmission`` ``(claim, bitmaps, fragment, index)``
            (None when ok or unprovable).
        kind: ``"aggregate"`` or ``"omission"`` (challenges 1 and 5 of PROTOCOL.md §5).
    """

    round: int
    ok: bool
    fragment: int | None = None
    coordinate: int | None = None
    detail: str = ""
    proof: tuple | None = None
    kind: str = "aggregate"


class NotTheSignedPayload(TenzroError):
    """An accepted payload whose bytes or vector are not what its trainer signed (says which)."""


@dataclass
class _Committed:
    """One committed round as its transcript shows it."""

    event: Mapping[str, Any]
    states: list  # rc.FragmentState per fragment
    vectors: list  # (weights, momentum) float32 (n,) per fragment
    transcript: RoundTranscript | None

    @property
    def leaves(self) -> list:
        return [s.leaf for s in self.states]

    @property
    def roots(self) -> tuple:
        """The preimage of the round's commitment word (``RoundRoots``)."""
        e = self.event
        return (bytes(e["fragmentsRoot"]), bytes(e["creditsRoot"]), int(e["totalCredits"]),
                rc.bitmaps_hash([int(b) for b in e["acceptedBitmaps"]]))


def _vec(ipfs, ref, cap: int, what: str) -> torch.Tensor:
    raw = ipfs.cat(ref.cid, max_bytes=cap)
    if "0x" + hashlib.sha256(raw).hexdigest() != ref.sha256.lower():
        raise TenzroError(f"{what} at {ref.cid} does not hash to {ref.sha256}")
    return flatten_fragment(decode_fragment(raw)[0])


class RootRoundChecker:
    """Checks the committed rounds of one root-flow run (see the module docstring).

    Args:
        chain: a `ChainClient` (read-only is enough). ipfs: an `IpfsClient`.
        task_id: the run. spec: its `TaskSpec`. runtime: its `TaskRuntime`.
        start_block: the first block that can hold an event of the run.
    """

    @classmethod
    def for_run(cls, chain, ipfs, task_id: bytes, run, start_block: int,
                max_params: int | None = None) -> "RootRoundChecker":
        """A checker of ``run`` (a `RunView`): its spec, checked against ``specHash``, and its model
        layout (at most ``max_params`` parameters; None: `TaskRuntime`'s default)."""
        from tenzro_operator.task_assets import fetch_spec

        spec = fetch_spec(ipfs, run.spec_cid, run.spec_hash)
        runtime = TaskRuntime.from_spec(spec) if max_params is None else TaskRuntime.from_spec(spec,
                                                                                             max_params=max_params)
        return cls(chain, ipfs, task_id, spec, runtime, start_block)

    def __init__(self, chain, ipfs, task_id: bytes, spec, runtime: TaskRuntime, start_block: int):
        self.chain, self.ipfs, self.task_id, self.spec, self.runtime = chain, ipfs, task_id, spec, runtime
        self.start_block = start_block
        run = chain.get_run(task_id)
        self.enrolled = run.enrolled_count
        self.trainers = [a.lower() for a in chain.trainers_of(task_id)]
        cfg = outer_config(spec)
        self.lr, self.mu, self.nesterov = cfg.lr, cfg.momentum, cfg.nesterov
        self.alpha_bps = int(spec.aggregation_params.get("alpha_bps", 0))
        state, _ = initial_weights(ipfs, spec, runtime, run.initial_weights_root)
        w0 = fragment_vectors(state, runtime.fragments)
        self._initial = _Committed({}, [rc.FragmentState.initial(f, w) for f, w in enumerate(w0)],
                                   [(w, torch.zeros_like(w)) for w in w0], None)
        # round -> the committed state read last (rounds are checked in order, so round r - 1's
        # entry is the commit round r builds on; rounds below the one before are dropped)
        self._latest: dict[int, _Committed] = {}

    # ------------------------------------------------------------------ committed state

    def committed(self, r: int, event: Mapping[str, Any]) -> _Committed:
        """Round r's committed state from its transcript (kept while it is the last round read)."""
        held = self._latest.get(r)
        if held is None or bytes(held.event["transcriptHash"]) != bytes(event["transcriptHash"]):
            tr = RoundTranscript.parse(self.ipfs.cat(event["transcriptCid"], max_bytes=MAX_TRANSCRIPT_BYTES),
                                       bytes(event["transcriptHash"]))
            states, vectors = [], []
            for fr in sorted(tr.fragments, key=lambda x: x.fragment):
                f = fr.fragment
                if fr.momentum is None:
                    raise TenzroError(f"round {r}'s transcript pins no momentum for fragment {f}")
                cap = self.runtime.payload_cap(f)
                w = _vec(self.ipfs, fr.weights, cap, f"fragment {f}'s weights")
                m = _vec(self.ipfs, fr.momentum, cap, f"fragment {f}'s momentum")
                sets = {self.trainers.index(s.trainer.lower()): self._struct(r, f, s).struct_hash()
                        for s in fr.accepted}
                states.append(rc.FragmentState.build(f, w, m, rc.AcceptedSet(sets, self.enrolled)))
                vectors.append((w, m))
            self._latest = {k: v for k, v in self._latest.items() if k >= r - 1}
            self._latest[r] = _Committed(event, states, vectors, tr)
        return self._latest[r]

    def _struct(self, r: int, f: int, s) -> rc.OuterGradient:
        if None in (s.base_root, s.payload_root, s.payload_sumsq, s.signature):
            raise TenzroError(f"round {r} fragment {f}: the transcript's entry of {s.trainer} lacks its signed struct")
        return rc.OuterGradient(self.task_id, r, f, bytes.fromhex(s.base_root[2:]), bytes.fromhex(s.payload_root[2:]),
                                s.payload_sumsq, s.cid, bytes.fromhex(s.sha256[2:]))

    def _payload(self, r: int, f: int, s, struct: rc.OuterGradient) -> tuple[torch.Tensor, ChunkTree]:
        """The vector (float32, shape (n,)) of accepted submission ``s`` of round r, fragment f, and
        its §2 chunk tree (the aggregate proof opens it):
        from IPFS, else (a forced payload whose CID nobody serves) from its whole-payload answer
        on-chain (`whole_answer`), which the syncer had to count. The bytes must hash to the signed
        ``payloadHash`` and decode to the vector of the signed chunk commitment (PROTOCOL.md §2).

        Raises:
            IpfsUnavailable: this checker's own node is down. IpfsError: the CID does not answer
                and no whole answer on-chain holds the payload. NotTheSignedPayload: the bytes
                or their vector are not what the trainer signed.
        """
        try:
            raw = self.ipfs.cat(s.cid, max_bytes=self.runtime.payload_cap(f))
        except IpfsUnavailable:
            raise
        except IpfsError:
            vec = answered_vector(self.chain, self.task_id, self.start_block, r, f, s.trainer,
                                  self.runtime.sizes[f], struct.payload_root, struct.payload_sumsq)
            if vec is None:
                raise
            return vec, ChunkTree(vec)
        who = f"round {r} fragment {f}: {s.trainer}'s accepted payload {s.cid}"
        if hashlib.sha256(raw).digest() != struct.payload_hash:
            raise NotTheSignedPayload(f"{who} does not hash to its signed payloadHash 0x{struct.payload_hash.hex()}")
        try:
            vec = flatten_fragment(self.runtime.decode_payload(raw, f)[0])
        except PayloadError as exc:
            raise NotTheSignedPayload(f"{who} does not decode: {exc}") from None
        tree = ChunkTree(vec)
        if tree.root != (struct.payload_root, struct.payload_sumsq):
            raise NotTheSignedPayload(f"{who} decodes to a vector that is not the signed chunk commitment "
                                      f"0x{struct.payload_root.hex()}")
        return vec, tree

    def previous(self, r: int) -> _Committed:
        """Round r - 1's committed state (the initial state for r = 0): the one read last, else
        from its last ``RoundCommitted`` event."""
        if r == 0:
            return self._initial
        if r - 1 in self._latest:
            return self._latest[r - 1]
        rounds = committed_rounds(self.chain, self.task_id, self.start_block, r)
        if r - 1 not in rounds:
            raise TenzroError(f"round {r - 1} has no RoundCommitted event")
        return self.committed(r - 1, rounds[r - 1])

    def norm_reference(self, r: int, f: int) -> tuple[tuple, list[int]] | None:
        """The ``NormReference`` of round r's fragment f for ``proveNormOutlier`` (PROTOCOL.md §4,
        root flow): round r - 1's roots, fragment f's leaf and its path in the fragments tree, and
        each submission round r - 1 accepted on f (trainer index, signed fields, slot path,
        signature), ascending by index; with the accepted sums of squares (binary32 bit patterns).
        None for round 0 or when round r - 1 accepted nothing on f (no reference: no screen)."""
        if r == 0:
            return None
        prev = self.previous(r)
        fr = next((x for x in prev.transcript.fragments if x.fragment == f), None) if prev.transcript else None
        if fr is None or not fr.accepted:
            return None
        acc = prev.states[f].accepted
        entries, sums = [], []
        for s in sorted(fr.accepted, key=lambda s: self.trainers.index(s.trainer.lower())):
            i = self.trainers.index(s.trainer.lower())
            og = self._struct(r - 1, f, s)
            entries.append((i, og.base_root, og.payload_root, og.payload_sumsq, og.cid_hash, og.payload_hash,
                            acc.path(i), bytes.fromhex(s.signature.removeprefix("0x"))))
            sums.append(int(og.payload_sumsq))
        ref = (prev.roots, prev.states[f].leaf.as_tuple(), rc.fragments_tree(prev.leaves).path(f), entries)
        return ref, sums

    # ------------------------------------------------------------------ the check

    def _aggregate(self, xs: list[torch.Tensor], n: int) -> torch.Tensor:
        if not xs:
            return torch.zeros(n, dtype=torch.float32)
        x = torch.stack(xs)
        name = self.spec.aggregation_name
        if name == "Mean":
            return canonical.mean(x)
        if name == "TrimmedMean":
            return canonical.trimmed_mean(x, self.alpha_bps)
        if name == "CoordinateMedian":
            return canonical.coordinate_median(x)
        raise TenzroError(f"rule {name} cannot be in the root flow")

    def _claim(self, r: int, cur: _Committed, prev: _Committed) -> tuple:
        """The ``RoundClaim`` of round r: its roots, the previous round's and weights root."""
        previous_roots = ZERO_ROOTS if r == 0 else prev.roots
        prev_weights_root = bytes(32) if r == 0 else bytes(prev.event["weightsRoot"])
        return (self.task_id, r, cur.roots, previous_roots, prev_weights_root)

    def omissions(self, r: int, event: Mapping[str, Any]) -> list[tuple[int, int]]:
        """``(fragment, trainer index)`` of every forced submission of round r that is live
        on-chain (revealed in the opening the round was committed in, not rejected) while the committed bitmaps leave its bit clear: challenge 5 of PROTOCOL.md §5."""
        bitmaps = [int(b) for b in event["acceptedBitmaps"]]
        out = []
        for i, trainer in enumerate(self.trainers):
            submitted, rejected = self.chain.submissions_of(self.task_id, r, trainer)
            live = submitted & ~rejected & ~bitmaps[i]
            out += [(f, i) for f in range(len(self.runtime.fragments)) if live >> f & 1]
        return out

    def check(self, r: int, event: Mapping[str, Any]) -> RootCheck:
        """Check round r against its ``RoundCommitted`` event (see the module docstring): first
        that no live forced submission is left out (`omissions`), then the aggregate.

        Raises:
            TenzroError / IpfsError: a transcript, blob or payload that cannot be read (the check is
                retried; a payload nobody serves is the slot challenge's business).
        """
        cur = self.committed(r, event)
        left_out = self.omissions(r, event)
        if left_out:
            f, i = left_out[0]
            bitmaps = [int(b) for b in event["acceptedBitmaps"]]
            return RootCheck(r, False, f, i, f"trainer {i}'s forced submission of fragment {f} is live on-chain but "
                                             f"left out of the commit ({len(left_out)} such)",
                             (self._claim(r, cur, self.previous(r)), bitmaps, f, i), kind="omission")
        if rc.fragments_root(cur.leaves) != bytes(event["fragmentsRoot"]):
            return RootCheck(r, False, detail="the transcript's weights, momentum and accepted sets do not give the "
                                              "committed fragments root (unprovable by an aggregate proof)")
        prev = self.previous(r)
        for f, fr in enumerate(sorted(cur.transcript.fragments, key=lambda x: x.fragment)):
            n = self.runtime.sizes[f]
            subs, payloads, trees = {}, {}, {}
            for s in fr.accepted:
                i = self.trainers.index(s.trainer.lower())
                subs[i] = self._struct(r, f, s)
                try:
                    payloads[i], trees[i] = self._payload(r, f, s, subs[i])
                except NotTheSignedPayload as exc:  # aggregated, yet not the data the trainer signed
                    return RootCheck(r, False, f, detail=f"{exc} (unprovable by an aggregate proof)")
            g = self._aggregate([payloads[i] for i in sorted(payloads)], n)
            pw, pm = prev.vectors[f]
            w, m = canonical.nesterov_step(pw, pm, g, self.lr, self.mu, self.nesterov)
            cw, cm = cur.vectors[f]
            diff = ((w.view(torch.int32) != cw.view(torch.int32)) | (m.view(torch.int32) != cm.view(torch.int32)))
            if not bool(diff.any()):
                continue
            c = int(diff.nonzero()[0])
            opening = rc.build_aggregate_opening(fragment=f, coordinate=c, current=cur.states[f],
                                                 previous=prev.states[f], current_leaves=cur.leaves,
                                                 previous_leaves=prev.leaves, submissions=subs, payloads=trees)
            sigs = [bytes.fromhex(next(s.signature for s in fr.accepted
                                       if self.trainers.index(s.trainer.lower()) == e.trainer_index)[2:])
                    for e in opening.entries]
            claim = self._claim(r, cur, prev)
            detail = (f"fragment {f} coordinate {c}: committed weight {float(cw[c])!r} momentum {float(cm[c])!r}, "
                      f"recomputed {float(w[c])!r} / {float(m[c])!r} ({int(diff.sum())} coordinates differ)")
            return RootCheck(r, False, f, c, detail, (claim, opening.as_tuple(), sigs))
        return RootCheck(r, True)

    def replay(self, r: int, event: Mapping[str, Any] | None, record, receipt_digest: bytes | None,
               check_payloads: bool = True) -> tuple[RoundReport, bytes, bytes, bytes]:
        """Check sealed round r for ``verify_receipt``: returns (report, weights root, transcript
        hash, round digest with the record's challenge status folded in, as the receipt carries
        it), the values taken from the event and checked against the registry's ``getRound``
        ``record`` and the receipt's digest; with ``check_payloads`` the round is recomputed too
        (`check`)."""
        t0 = time.perf_counter()
        rep = RoundReport(r)

        def fail(what: str, expected: Any, got: Any) -> None:
            rep.mismatches.append(Mismatch(what, str(expected), str(got), r))

        if event is None:
            fail(f"round {r} RoundCommitted event", "one event", "none found")
            return rep, b"", record.transcript_hash, record.round_digest
        wroot, thash = bytes(event["weightsRoot"]), bytes(event["transcriptHash"])
        bitmaps = [int(b) for b in event["acceptedBitmaps"]]
        accepted = sum(bin(b).count("1") for b in bitmaps)
        rep.accepted = accepted
        try:
            cur = self.committed(r, event)
        except IpfsUnavailable:
            raise
        except TenzroError as exc:  # a transcript or blob that is missing or does not match
            fail(f"round {r} transcript and pinned state", "retrievable and matching the commit", exc)
            cur = None
        if cur is not None:
            frs = sorted(cur.transcript.fragments, key=lambda x: x.fragment)
            # the fragment hashes are the §2 roots of the pinned weights (PROTOCOL.md §5)
            got = receipt.weights_root([leaf.weights_root for leaf in cur.leaves])
            if got != wroot:
                fail(f"round {r} weights root (transcript's weights vs event)", "0x" + wroot.hex(), "0x" + got.hex())
            want = [0] * len(self.trainers)
            for fr in frs:
                for s in fr.accepted:
                    want[self.trainers.index(s.trainer.lower())] |= 1 << fr.fragment
            if want != bitmaps:
                fail(f"round {r} accepted bitmaps (transcript vs commit)", bitmaps, want)
            if check_payloads:
                res = self.check(r, event)
                rep.payloads_checked = accepted
                if not res.ok:
                    what = ("forced submission (live on-chain vs committed bitmaps)" if res.kind == "omission"
                            else "state (recomputed vs committed)")
                    fail(f"round {r} fragment {res.fragment} {what}", "the recomputation", res.detail)
        for what, want_, got in ((f"round {r} transcript hash (getRound vs event)", record.transcript_hash, thash),
                                 (f"round {r} accepted count (getRound vs bitmaps)", record.accepted_count, accepted)):
            if want_ != got:
                fail(what, want_, got)
        digest = receipt.round_digest(r, wroot, thash, accepted)
        if digest != record.round_digest:
            fail(f"round {r} round digest (recomputed vs getRound)", "0x" + record.round_digest.hex(),
                 "0x" + digest.hex())
        digest = receipt.with_status(digest, record.challenge_status)
        if receipt_digest is not None and receipt_digest != digest:
            fail(f"round {r} round digest (recomputed vs receipt)", "0x" + receipt_digest.hex(), "0x" + digest.hex())
        rep.seconds = time.perf_counter() - t0
        return rep, wroot, thash, digest

