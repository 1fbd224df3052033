"""Whether a submission is valid: fetch its CID from IPFS (bounded retries, a byte cap, a budget
tied to the round's deadline; unavailable -> ``Unavailable``), sha256 of the bytes == payloadHash
(else ``HashMismatch``), decodes as a ``pseudo_gradient`` payload of this task, round and fragment
under the spec's codec (else ``Malformed``), names / shapes / dtype, finite (``NonFinite``), the
bytes decode to the vector of the signed chunk commitment; then the norm screen
(`tenzro_operator.evidence.norm_outliers`; a forced submission against the previous committed
round's accepted sums, the reference of ``proveNormOutlier``).

Part of `tenzro_operator.roles.syncer.SyncerDaemon`; imports nothing of the other roles, nor the
syncer's module.
"""

from __future__ import annotations

import logging
import contextvars
import hashlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import torch

from tenzro_operator.chain import RunView
from tenzro_operator.errors import (
    IpfsContentError,
    IpfsError,
    IpfsIntegrityError,
    IpfsNotFound,
    IpfsUnavailable,
    TenzroError,
)
from tenzro_operator.evidence import exceeds_reference, norm_outliers
from tenzro_operator.metrics import task_label
from tenzro_operator.roles.syncer_round import _REASON_OF_REJECT, _Sub
from tenzro_trainer.aggregation import validate_payload
from tenzro_trainer.commitment import ChunkTree, flatten_fragment
from tenzro_trainer.errors import PayloadError, PayloadRejected


log = logging.getLogger("tenzro.syncer")


class PayloadValidation:
    """The checks of a round's submissions (see the module docstring)."""

    _split_lock = threading.Lock()  # the fetch threads of `validate_all` add to one timing split
    _norm_refs: dict  # (round, fragment) -> `_norm_reference`'s answer, the open round's only

    def validate_all(self, subs: list[_Sub], run: RunView) -> None:
        """Validate new submissions ``fetch_workers`` at a time, each within a fetch budget tied to
        the round's deadline (`_fetch_budget_s`), then record them in chain order; duplicate
        payload hashes of the round are rejected after (the first submitted keeps its place).

        Raises:
            IpfsUnavailable: this syncer's own IPFS node is down (the submissions validated so
                far are kept; the others are read again on the next poll).
        """
        rs = self._round
        if not subs:
            return
        deadline = time.monotonic() + self._fetch_budget_s(run)
        workers = min(int(self.opt("fetch_workers", 8)), len(subs))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fetch") as pool:
            # each thread runs in a copy of this one's context: log lines keep role, task and round
            futures = [pool.submit(contextvars.copy_context().run, self.validate, sub, deadline) for sub in subs]
        outage = None
        for sub, fut in zip(subs, futures):
            exc = fut.exception()
            if exc is not None:
                if not isinstance(exc, IpfsUnavailable):
                    raise exc
                outage = outage or exc
                continue
            first = next((s for s in rs.subs.values() if s.payload_hash == sub.payload_hash and s.key != sub.key), None)
            if first is not None and sub.reason is None:
                self._reject(sub, "Malformed", f"payload 0x{sub.payload_hash.hex()} duplicates the one trainer "
                                               f"{first.trainer} submitted for fragment {first.fragment}")
            rs.subs[(sub.fragment, sub.key)] = sub
            self.metrics.submissions.labels(task=task_label(self.task_id)).inc()
        if outage is not None:
            raise outage

    def _fetch_budget_s(self, run: RunView) -> float:
        """Seconds the fetches of one batch may take: ``fetch_retries * fetch_timeout_s``, cut to
        the time left before the round's deadline (at least one ``fetch_timeout_s``), so that
        unavailable payloads never push the finalize past the deadline by more than that."""
        per = float(self.opt("fetch_timeout_s", 10.0))
        full = per * int(self.opt("fetch_retries", 3))
        left = float(run.round_deadline - self.chain_now())
        return max(per, min(full, left))

    def validate(self, sub: _Sub, deadline: float | None = None) -> None:
        """Fetch (bounded retries, byte cap `payload_cap`, everything before the monotonic
        ``deadline``) and check one submission; sets ``sub.reason`` when invalid. Every fault of
        the submission is its rejection, never an exception: a CID that is not one, that can not
        be verified, a directory or too many bytes is ``Malformed``; not found in time, bytes that
        do not match the CID, or a node refusal about this CID are ``Unavailable`` (not slashed).

        Raises:
            IpfsUnavailable: this syncer's own IPFS node does not answer.
        """
        rs = self._round
        t0 = time.perf_counter()
        retries = int(self.opt("fetch_retries", 3))
        per = float(self.opt("fetch_timeout_s", 10.0))
        if deadline is None:
            deadline = time.monotonic() + per * retries
        raw, why, fault = None, "", None
        cap = self.runtime.payload_cap(sub.fragment)
        for attempt in range(retries):
            left = deadline - time.monotonic()
            if left <= 0:
                why = why or "the round's fetch budget was spent"
                break
            try:
                raw = self.ipfs.cat(sub.cid, timeout_s=min(per, left), max_bytes=cap)
                break
            except IpfsUnavailable:
                raise
            except (IpfsNotFound, IpfsIntegrityError) as exc:
                why = str(exc)
                if attempt + 1 < retries:
                    time.sleep(min(0.2 * 2 ** attempt, 2.0, max(0.0, deadline - time.monotonic())))
            except IpfsContentError as exc:  # not a CID, unverifiable, a directory, oversize
                fault = str(exc)
                break
            except IpfsError as exc:  # the node refused this CID for a reason of its own
                why = str(exc)
                break
        with self._split_lock:
            rs.split["fetch_s"] += time.perf_counter() - t0
        t1 = time.perf_counter()
        try:
            if fault is not None:
                self._reject(sub, "Malformed", f"cid {sub.cid!r}: {fault}")
                return
            if raw is None:
                self._reject(sub, "Unavailable", f"payload not retrievable from IPFS: {why}")
                return
            self.metrics.ipfs_in(len(raw))
            got = hashlib.sha256(raw).digest()
            if got != sub.payload_hash:
                self._reject(sub, "HashMismatch", f"sha256 of the bytes at the CID is 0x{got.hex()}, "
                                                  f"payloadHash posted 0x{sub.payload_hash.hex()}")
                return
            try:
                tensors, meta = self.runtime.decode_payload(raw, sub.fragment)  # under the task's codec
            except PayloadError as exc:
                self._reject(sub, "Malformed", str(exc))
                return
            want = {"kind": "pseudo_gradient", "round": str(rs.round), "fragment": str(sub.fragment),
                    "task": self.runtime.task, "trainer": sub.key}
            bad = {k: meta.get(k) for k, v in want.items() if meta.get(k) != v}
            if bad:
                self._reject(sub, "Malformed", f"payload metadata {bad} does not match {want}")
                return
            try:
                norm = validate_payload(tensors, self.runtime.layouts[sub.fragment])
            except PayloadRejected as exc:
                reason = _REASON_OF_REJECT.get(exc.reason, "Malformed")
                if reason == "NonFinite" and self._matches_commitment(sub, tensors):
                    sub.reason, sub.detail = reason, str(exc)  # keep the tree: the proof opens it
                    self.metrics.rejections.labels(task=task_label(self.task_id), reason=reason).inc()
                    log.warning("REJECTED submission trainer=%s fragment=%d cid=%s reason=NonFinite: %s",
                                sub.trainer, sub.fragment, sub.cid, exc)
                else:
                    self._reject(sub, "Malformed", str(exc))
                return
            if not self._matches_commitment(sub, tensors):
                self._reject(sub, "Unavailable", "the payload at the CID is not the vector of the signed commitment "
                                                 f"(payloadRoot 0x{sub.signed.payload_root.hex()})")
                return
            sub.tensors, sub.tree, sub.flat = tensors, None, None
            log.info("valid submission trainer=%s fragment=%d norm=%.4g", sub.trainer, sub.fragment, norm)
        finally:
            with self._split_lock:
                rs.split["validate_s"] += time.perf_counter() - t1

    def _matches_commitment(self, sub: _Sub, tensors: dict[str, torch.Tensor]) -> bool:
        """Whether the decoded tensors are the vector the trainer committed to (PROTOCOL.md §2);
        keeps the tree and flat vector on ``sub``."""
        sub.flat = flatten_fragment(tensors)
        sub.tree = ChunkTree(sub.flat)
        return sub.tree.root == (sub.signed.payload_root, sub.signed.payload_sumsq)

    def _reject(self, sub: _Sub, reason: str, detail: str, keep_tensors: bool = False) -> None:
        """Mark ``sub`` rejected (counted, logged); its decoded tensors go unless ``keep_tensors`` (a
        credit verdict that a refused commit may undo, `CreditForWork.credit_rollback`)."""
        sub.reason, sub.detail = reason, detail
        if not keep_tensors:
            sub.tensors = None
        if reason != "NonFinite":
            sub.tree = sub.flat = None
        self.metrics.rejections.labels(task=task_label(self.task_id), reason=reason).inc()
        log.warning("REJECTED submission trainer=%s fragment=%d cid=%s reason=%s: %s", sub.trainer, sub.fragment,
                    sub.cid, reason, detail)

    def _fragment_subs(self, f: int) -> list[_Sub]:
        return [s for s in self._round.subs.values() if s.fragment == f]

    def _index(self, sub: _Sub) -> int:
        """The trainer index of a submission (``trainersOf`` order)."""
        return self._trainer_indices(sub.key)[sub.key]

    def _trainer_indices(self, must_hold: str | None = None) -> dict[str, int]:
        """Lower-case trainer address -> index (``trainersOf``), read again when empty or missing
        ``must_hold`` (a trainer seen on-chain; never for an address from pubsub, anyone's to send)."""
        if not self._trainer_index or (must_hold is not None and must_hold not in self._trainer_index):
            self._trainer_index = {a.lower(): i for i, a in enumerate(self.chain.trainers_of(self.task_id))}
        return self._trainer_index

    def _norm_screen(self) -> dict[int, list[_Sub]]:
        """Accepted submissions per fragment: the structurally valid ones that are not norm
        outliers. The off-chain submissions are screened against their own median (`norm_outliers`);
        a forced one against the previous committed round's accepted sums of the fragment (the
        reference of ``proveNormOutlier``, which the round's forcing sybils cannot move, issue #23
        attack 6), unless the registry refused to convict it (`_Sub.unprovable`: left out, it
        would be proven omitted)."""
        out: dict[int, list[_Sub]] = {f: [] for f in range(len(self.runtime.fragments))}
        for f in out:
            subs = self._fragment_subs(f)
            screened = [s for s in subs if s.offchain]
            outliers = norm_outliers({self._index(s): s.signed.payload_sumsq for s in screened}, self.norm_screen_sq)
            if any(not s.offchain for s in subs):
                ref = self._norm_reference(f)
                outliers |= {self._index(s) for s in subs if not s.offchain and not s.unprovable and ref is not None
                             and exceeds_reference(s.signed.payload_sumsq, ref[1], self.norm_screen_sq)}
            out[f] = sorted((s for s in subs if s.reason is None and self._index(s) not in outliers),
                            key=lambda s: s.key)
        return out

    def _norm_reference(self, f: int) -> tuple[tuple, list[int]] | None:
        """The open round's norm-screen reference for fragment f (`RootRoundChecker.norm_reference`:
        the ``NormReference`` tuple and the previous round's accepted sums), read once per round
        and fragment. None when there is none (round 0, nothing accepted) or it cannot be read now
        (logged): forced submissions are then accepted, as the registry could not convict them."""
        r = self._round.round
        if (r, f) not in self._norm_refs:
            try:
                ref = self._root_checker().norm_reference(r, f)
            except (TenzroError, IpfsError) as exc:
                log.warning("round %d fragment %d: no norm-screen reference for forced submissions (%s)", r, f, exc)
                return None
            self._norm_refs = {k: v for k, v in self._norm_refs.items() if k[0] == r}
            self._norm_refs[(r, f)] = ref
        return self._norm_refs[(r, f)]
