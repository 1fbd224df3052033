"""The syncer's summary counts a run that ended sealed even when another account (a trainer, the
sponsor) sealed it first, and not a run that was cancelled (issue #27 item 8). A unit test of the
seal steps: the chain is a stand-in that refuses the seal as the registry does once the status moved
on, and reports the run's status."""

from __future__ import annotations

import logging
import threading
from types import SimpleNamespace

import pytest

from tenzro_operator.chain import RunStatus
from tenzro_operator.errors import ChainRevert
from tenzro_operator.roles.syncer import SyncerDaemon


class _SealedElsewhere:
    def __init__(self, status: RunStatus):
        self.status = status

    def seal_root_run(self, task_id):
        raise ChainRevert("Registry__WrongStatus")

    def get_run(self, task_id):
        return SimpleNamespace(status=self.status)


def _syncer(status: RunStatus):
    s = SimpleNamespace(task_id=b"\x01" * 32, chain=_SealedElsewhere(status), summary={"runs_sealed": 0},
                        _tally_lock=threading.Lock(), nudge_devnet=lambda t: None,
                        chain_now=lambda: 0)
    s._tally = lambda key, n: SyncerDaemon._tally(s, key, n)
    return s


def test_a_run_sealed_by_someone_else_counts_as_sealed(caplog):
    s = _syncer(RunStatus.SEALED)
    with caplog.at_level(logging.INFO, logger="tenzro"):
        assert SyncerDaemon.root_seal(s) is True
    assert s.summary["runs_sealed"] == 1 and "by another account" in caplog.text


def test_a_cancelled_run_is_not_counted_as_sealed():
    s = _syncer(RunStatus.CANCELLED)
    SyncerDaemon.root_seal(s)
    assert s.summary["runs_sealed"] == 0


def test_a_completed_run_says_once_what_it_waits_for(caplog):
    s = _syncer(RunStatus.COMPLETED)

    def refuse(task_id):
        raise ChainRevert("Registry__ChallengeWindowOpen")

    s.chain.seal_root_run = refuse
    with caplog.at_level(logging.INFO, logger="tenzro"):
        assert SyncerDaemon.root_seal(s) is False and SyncerDaemon.root_seal(s) is False
    said = [r.message for r in caplog.records if "stays COMPLETED" in r.message]
    assert len(said) == 1 and "challenge window closes" in said[0]
    assert s.summary["runs_sealed"] == 0
