"""Which run a trainer joins (a part of `TrainerDaemon`, `tenzro_operator.roles.trainer`): the
configured ``task_id`` once the registry has it, else a run this account is already enrolled in
and not finished, else an Enrolling run with a free slot that this account may enroll in (the
config's ``family``; a tier 1 run's ``enrollment_allowlist``); and, before enrolling, the wait for
the sponsor's ``useRootFlow``.

Must not import `tenzro_operator.roles.trainer` (it imports this module), another role
(``roles.syncer*``, ``roles.watcher``, ``roles.sponsor``) or anything of `tenzro_operator.cli`.
"""

from __future__ import annotations

import logging
import time

from tenzro_operator.chain import RunStatus, RunView
from tenzro_operator.errors import TenzroError
from tenzro_operator.spec import TaskSpec
from tenzro_operator.task_assets import fetch_spec

__all__ = ["RunDiscovery"]

log = logging.getLogger("tenzro.trainer")


class RunDiscovery:
    """Which run `TrainerDaemon` joins, and when it may enroll (see the module docstring)."""

    _specs: dict[bytes, TaskSpec]  # task id -> its spec (the `family` and allowlist filters; made by __init__)

    def find_task(self, patient: bool = False) -> bytes:
        """The run to join: the config's ``task_id`` (refused unless posted within ``task_wait_s``
        seconds, default at once), else a run this account is already enrolled in
        and not finished, else the first Enrolling run with a free slot (and, with ``family`` set,
        that architecture family) that this account may enroll in (a tier 1 run's spec lists it in
        ``enrollment_allowlist``; a run that does not is skipped).

        Raises:
            TenzroError: the configured task is not posted, or nothing found within
                ``discover_timeout_s`` seconds (unless ``patient``).
        """
        if self.config.task_id and not patient:
            return self._posted_task()
        what = f"task {self.config.task_id!r}" if self.config.task_id else "an Enrolling run with a free slot"
        return self.wait_for_task(self._discover, f"{what} on the registry", patient)

    def _posted_task(self) -> bytes:
        """The configured ``task_id`` once the registry has it; polls for ``task_wait_s`` seconds."""
        from tenzro_operator.spec import task_id_bytes32

        name = self.config.task_id
        tid = task_id_bytes32(name)
        deadline = time.monotonic() + float(getattr(self.config, "task_wait_s", 0.0))
        while not self.chain.run_exists(tid):
            if time.monotonic() >= deadline:
                hexlike = name.startswith("0x") and len(name) != 66
                raise TenzroError(
                    f"trainer: no run with task_id {name!r} (0x{tid.hex()}) on {self.chain.shown_url}"
                    + (" (a hex task id is 0x + 64 hex digits; this one was hashed as a name)" if hexlike else "")
                    + ": check task_id in the config (or --task-id / TENZRO_TASK_ID); `tenzro train list-runs` "
                      "lists the posted runs; set task_wait_s to wait for a run about to be posted")
            self.sleep(self.poll_s)
        return tid

    def _discover(self) -> bytes | None:
        runs = self.live_runs()
        for tid, run in runs:  # a restart: a run we are in and that is not over
            if run.status in (RunStatus.ENROLLING, RunStatus.TRAINING):
                stats = self.chain.trainer_stats(tid)
                if stats.enrolled:
                    return tid
        family = getattr(self.config, "family", None)
        now = None
        for tid, run in runs:
            if run.status != RunStatus.ENROLLING or run.enrolled_count >= run.trainer_count:
                continue
            now = self.chain_now() if now is None else now
            if now >= run.enrollment_deadline:  # enrolling now would be refused (EnrollmentClosed)
                continue
            if family is None and run.tier == 0:
                return tid
            spec = self._spec_of(tid, run)
            if spec is None or (family is not None and spec.architecture.family != family):
                continue
            if not self._listed(spec):
                log.info("run 0x%s enrolls only its sponsor's allowlist, which does not name %s: skipped",
                         tid.hex()[:16], self.account.address)
                self.bad_runs.add(tid)
                continue
            return tid
        return None

    def _spec_of(self, tid: bytes, run: RunView) -> TaskSpec | None:
        """Run ``tid``'s spec, fetched once per run (specs are immutable); None, with the run given
        up (`quarantine`), when the spec is unusable."""
        if tid not in self._specs:
            try:
                self._specs[tid] = fetch_spec(self.ipfs, run.spec_cid, run.spec_hash)
            except TenzroError as exc:
                self.quarantine(tid, exc)
                return None
        return self._specs[tid]

    def _listed(self, spec: TaskSpec) -> bool:
        """True unless the spec has an ``enrollment_allowlist`` (a tier 1 run) without this account."""
        allow = spec.enrollment_allowlist
        return not allow or self.account.address.lower() in {a.lower() for a in allow}

    def wait_root_flow(self, run: RunView) -> None:
        """Before enrolling: wait until the sponsor's ``useRootFlow`` has landed (the transaction
        after ``postTask`` that gives the run its initial fragments root and outer rule; it must
        come before any enrollment), at most until the enrollment deadline.

        Raises:
            TenzroError: the enrollment deadline passed and the sponsor never called useRootFlow.
        """
        while not self.chain.is_root_flow(self.task_id):
            if self.chain_now() >= run.enrollment_deadline:
                raise TenzroError(f"run 0x{self.task_id.hex()}'s sponsor never called useRootFlow (the run has "
                                  "no initial fragments root): not enrolling")
            log.info("waiting for the sponsor to put the run in the root flow before enrolling")
            self.sleep(self.poll_s)
