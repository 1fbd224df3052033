"""Bounds on what an outsider can make a syncer or a trainer spend on messages it may send for
free (issue #24): per-source rate limits (`TokenBuckets`), a memory of signatures that failed
(`FailedSignatures`) and the signature recoveries off the main thread, from a bounded queue
(`Verifier`).

Every structure here is bounded whatever anyone sends: the buckets by ``max_keys`` sources (the
least recently seen forgotten first), the failures by ``size`` pairs, the verifier's queue by
``max_pending`` jobs (the oldest dropped when full: an honest sender repeats its messages every
poll, a flood does not get to keep the queue)::

    v = Verifier(max_pending=4096); v.submit(digest, sig, "0xtrainer", on_ok=keep)   # -> a Job
    v.drain(timeout_s=0.2)   # the poll waits at most 0.2 s for the queue to empty
    v.close()
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Callable, Hashable

from tenzro_operator.root_flow import recover_signer

__all__ = ["BoundedSet", "FailedSignatures", "Job", "TokenBuckets", "Verifier"]

log = logging.getLogger("tenzro.intake")


class TokenBuckets:
    """One token bucket per source (a pubsub peer id, a client IP): ``burst`` tokens at most,
    refilled at ``rate_per_s`` tokens per second; at most ``max_keys`` sources remembered (the least
    recently seen one is forgotten first, so a new source starts full). Thread-safe.

    Counters: ``refused`` (takes refused).
    """

    def __init__(self, rate_per_s: float, burst: float, max_keys: int = 4096) -> None:
        self.rate, self.burst, self.max_keys = float(rate_per_s), float(burst), int(max_keys)
        self._buckets: collections.OrderedDict[Hashable, list[float]] = collections.OrderedDict()
        self._lock = threading.Lock()
        self.refused = 0

    def take(self, key: Hashable, n: float = 1.0) -> bool:
        """Take ``n`` tokens from ``key``'s bucket; False (nothing taken) when it holds fewer."""
        now = time.monotonic()
        with self._lock:
            b = self._buckets.pop(key, None)
            if b is None:
                b = [self.burst, now, 0.0]  # tokens, last refill, tokens its last refused take asked for
                while len(self._buckets) >= self.max_keys:
                    self._buckets.popitem(last=False)
            b[0] = min(self.burst, b[0] + (now - b[1]) * self.rate)
            b[1] = now
            self._buckets[key] = b
            if b[0] < n:
                self.refused += 1
                b[2] = n
                return False
            b[0] -= n
            b[2] = 0.0
            return True

    def exhausted(self, key: Hashable) -> bool:
        """True when ``key``'s bucket holds less than one token now, or less than its last refused
        take asked for (nothing taken; counted in ``refused``): the check a server can make before
        it reads a request, so a source refused once stays refused unread until it could pay again."""
        now = time.monotonic()
        with self._lock:
            b = self._buckets.get(key)
            if b is None or min(self.burst, b[0] + (now - b[1]) * self.rate) >= max(1.0, b[2]):
                return False
            self.refused += 1
            return True

    def __len__(self) -> int:
        return len(self._buckets)


class BoundedSet:
    """The last ``size`` keys added (the oldest forgotten first). Thread-safe. Counter: ``hits``."""

    def __init__(self, size: int) -> None:
        self.size = int(size)
        self._seen: collections.OrderedDict[Hashable, None] = collections.OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0

    def add(self, key: Hashable) -> None:
        with self._lock:
            self._seen[key] = None
            self._seen.move_to_end(key)
            while len(self._seen) > self.size:
                self._seen.popitem(last=False)

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            hit = key in self._seen
            self.hits += hit
            return hit

    def __len__(self) -> int:
        return len(self._seen)


class FailedSignatures(BoundedSet):
    """The last ``size`` (digest, signature, address expected) triples whose signature did not
    recover to that address: a replayed forgery costs a set lookup, not a recovery. The address
    is part of the key: the same signature over the same digest may be good for its real signer
    (a struct's fields do not name the trainer, so a copy naming another one fails where the
    original does not)."""

    def __init__(self, size: int = 65536) -> None:
        super().__init__(size)

    def add(self, digest: bytes, signature: bytes, expected: str) -> None:  # type: ignore[override]
        super().add((digest, signature, expected))


class Job:
    """One queued recovery: ``done`` is set once it ran (or was dropped); ``ok`` says whether the
    signature recovered to the address expected (None: dropped unverified), ``signer`` to which
    ("" for none)."""

    __slots__ = ("digest", "signature", "expected", "on_ok", "done", "ok", "signer")

    def __init__(self, digest: bytes, signature: bytes, expected: str, on_ok: Callable[[], None]) -> None:
        self.digest, self.signature, self.expected, self.on_ok = digest, signature, expected, on_ok
        self.done, self.ok, self.signer = threading.Event(), None, ""

    def wait(self, timeout_s: float) -> bool | None:
        """``ok`` once done within ``timeout_s`` seconds, else None (still queued)."""
        self.done.wait(timeout_s)
        return self.ok


class Verifier:
    """Signature recoveries on a background thread, so that no flood of signed-looking messages
    holds the thread that commits rounds. Jobs wait in a bounded queue, one per (digest,
    signature, address) (a repeat joins the queued job), the oldest dropped when ``max_pending`` are
    queued; a pair that failed once is refused at `submit` (`FailedSignatures`). A job that
    recovers to its ``expected`` address runs its ``on_ok`` on the verifier's thread.

    Counters: ``recovered`` (to the address expected), ``failed`` (to another address or none),
    ``dropped`` (queue full), ``known_bad`` (refused at submit from memory).
    """

    def __init__(self, max_pending: int = 4096, failures: FailedSignatures | None = None) -> None:
        self.max_pending = int(max_pending)
        self.failures = failures if failures is not None else FailedSignatures()
        self._jobs: collections.OrderedDict[tuple[bytes, bytes, str], Job] = collections.OrderedDict()
        self._cond = threading.Condition()
        self._busy = False
        self._closed = False
        self._thread: threading.Thread | None = None
        self.recovered = self.failed = self.dropped = self.known_bad = 0

    def submit(self, digest: bytes, signature: bytes, expected: str, on_ok: Callable[[], None]) -> Job | None:
        """Queue a recovery of ``signature`` over ``digest`` that must give ``expected`` (lower-case);
        None when it is known to fail (nothing queued). A job queued for the same triple is
        returned as is (its ``on_ok`` kept: the same message)."""
        key = (bytes(digest), bytes(signature), expected)
        if key in self.failures:
            self.known_bad += 1
            return None
        with self._cond:
            held = self._jobs.get(key)
            if held is not None:
                return held
            job = Job(key[0], key[1], expected, on_ok)
            while len(self._jobs) >= self.max_pending:
                _, old = self._jobs.popitem(last=False)
                self.dropped += 1
                old.done.set()
            self._jobs[key] = job
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._run, name="intake-verifier", daemon=True)
                self._thread.start()
            self._cond.notify()
        return job

    def pending(self) -> int:
        """Jobs queued or running."""
        with self._cond:
            return len(self._jobs) + self._busy

    def drain(self, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` seconds for the queue to empty; returns the jobs still pending."""
        end = time.monotonic() + timeout_s
        with self._cond:
            while (self._jobs or self._busy) and not self._closed:
                left = end - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return len(self._jobs) + self._busy

    def close(self) -> None:
        """Stop the thread; queued jobs are dropped."""
        with self._cond:
            self._closed = True
            for job in self._jobs.values():
                job.done.set()
            self._jobs.clear()
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._jobs and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                _, job = self._jobs.popitem(last=False)
                self._busy = True
            try:
                job.signer = recover_signer(job.digest, job.signature)
                job.ok = job.signer == job.expected
                if job.ok:
                    self.recovered += 1
                    job.on_ok()
                else:
                    self.failed += 1
                    self.failures.add(job.digest, job.signature, job.expected)
            except Exception:  # noqa: BLE001 - a keeper's bug must not end the thread
                log.exception("keeping a verified message failed")
            finally:
                job.done.set()
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
