"""EventWatcher: ordered dispatch, on-disk checkpoint, exactly-once across watcher restarts and an
anvil restart, isolated handler failures that halt on purpose."""

from __future__ import annotations

import json
import threading
import time

import pytest

from stack import TOKEN
from tenzro_operator.chain import ChainClient
from tenzro_operator.chain.event_cursor import EventWatcher
from tenzro_operator.errors import EventWatcherHalted
from tenzro_operator.keys import anvil_account
from tenzro_operator.metrics import TrainerMetrics


def approvals(client: ChainClient, amounts) -> None:
    """One Approval event per amount (spender = anvil account 9, a unique marker)."""
    for a in amounts:
        client.approve(a, spender=anvil_account(9).address)


def watcher(client, path, **kw) -> EventWatcher:
    return EventWatcher(client, ["Approval"], path, contract="TenzroToken", **kw)


def collect(w: EventWatcher, into: list, owner: str) -> EventWatcher:
    w.on("Approval", lambda ev: into.append(ev["args"]["value"]) if ev["args"]["owner"] == owner else None)
    return w


def test_checkpoint_resume_exactly_once(fresh_stack, tmp_path):
    c = ChainClient(fresh_stack.rpc_url, fresh_stack.deployments, anvil_account(1))
    ckpt = tmp_path / "ckpt.json"
    approvals(c, [1, 2, 3])
    seen: list[int] = []
    w = collect(watcher(c, ckpt, max_range=2), seen, c.address)  # several bounded ranges
    assert w.poll_once() >= 3
    assert seen == [1, 2, 3]
    doc = json.loads(ckpt.read_text())
    assert doc["next_block"] == c.block_number() + 1 and doc["extra"] == {}
    # A new watcher (a restarted daemon) resumes from the file: nothing twice, new events once.
    approvals(c, [4])
    seen2: list[int] = []
    w2 = collect(watcher(c, ckpt), seen2, c.address)
    w2.poll_once()
    assert seen2 == [4]
    assert w2.poll_once() == 0


def test_handler_failure_is_retried_in_order_then_resumed_after_restart(fresh_stack, tmp_path, caplog):
    c = ChainClient(fresh_stack.rpc_url, fresh_stack.deployments, anvil_account(1))
    approvals(c, [10, 20, 30])
    ckpt = tmp_path / "ckpt.json"
    seen: list[int] = []
    fail = {"20": 1}
    metrics = TrainerMetrics()

    def handler(ev):
        v = ev["args"]["value"]
        if ev["args"]["owner"] != c.address:
            return
        if fail.get(str(v), 0) > 0:
            fail[str(v)] -= 1
            raise RuntimeError(f"boom on {v}")
        seen.append(v)

    w = watcher(c, ckpt, metrics=metrics).on("Approval", handler)
    w.poll_once()
    assert seen == [10]  # stopped at the failing event; 30 not handled out of order
    assert "boom on 20" in caplog.text and "failure 1/5 in a row" in caplog.text
    assert w.errors == 1
    assert metrics.handler_errors.labels(event="Approval")._value.get() == 1
    # The daemon dies here; a new watcher from the checkpoint handles 20 and 30, never 10 again.
    w2 = watcher(c, ckpt).on("Approval", handler)
    w2.poll_once()
    assert seen == [10, 20, 30]


def test_consecutive_failures_halt_on_purpose(fresh_stack, tmp_path):
    c = ChainClient(fresh_stack.rpc_url, fresh_stack.deployments, anvil_account(1))
    approvals(c, [5])

    def bad(ev):
        raise ValueError("always")

    w = watcher(c, tmp_path / "ckpt.json", max_consecutive_failures=3).on("Approval", bad)
    w.poll_once()
    w.poll_once()
    with pytest.raises(EventWatcherHalted, match="failed 3 times in a row; last on Approval"):
        w.poll_once()


def test_survives_an_anvil_restart(fresh_stack, tmp_path):
    c = ChainClient(fresh_stack.rpc_url, fresh_stack.deployments, anvil_account(1), retries=2, backoff_s=0.05)
    ckpt = tmp_path / "ckpt.json"
    seen: list[int] = []
    w = collect(watcher(c, ckpt, max_rpc_downtime_s=60), seen, c.address)
    stop = threading.Event()
    errors: list[BaseException] = []

    def run():
        try:
            w.run(stop, poll_interval_s=0.1)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    th = threading.Thread(target=run, daemon=True)
    th.start()
    approvals(c, [1, 2])
    _wait_for(lambda: seen == [1, 2])
    fresh_stack.anvil.stop()
    time.sleep(1.0)  # the watcher polls into a dead endpoint meanwhile
    fresh_stack.anvil.start()
    c.resync_nonce()
    approvals(c, [3, 4])
    _wait_for(lambda: seen == [1, 2, 3, 4])
    stop.set()
    th.join(10)
    assert not errors, errors
    assert seen == [1, 2, 3, 4]


def test_rpc_down_too_long_reraises(fresh_stack, tmp_path):
    from tenzro_operator.errors import RpcUnavailable

    c = ChainClient(fresh_stack.rpc_url, fresh_stack.deployments, retries=1, backoff_s=0.01)
    w = watcher(c, tmp_path / "ckpt.json", max_rpc_downtime_s=0.5)
    fresh_stack.anvil.stop()
    with pytest.raises(RpcUnavailable):
        w.run(poll_interval_s=0.05)


def test_task_filter_and_decoded_registry_events(roles, running_task, tmp_path):
    spec, tid = running_task
    base = roles["base"]
    got: list[dict] = []
    w = EventWatcher(base, ["TaskPosted", "TrainerEnrolled", "RoundOpened"], tmp_path / "c.json", task_id=tid)
    w.on("*", got.append)
    w.poll_once()
    names = [e["event"] for e in got]
    assert names == ["TaskPosted", "TrainerEnrolled", "TrainerEnrolled", "RoundOpened"]
    assert all(e["args"]["taskId"] == tid for e in got)
    posted = got[0]["args"]["params"]
    assert posted["fragmentSizes"] == [600, 400] and posted["minStake"] == 100 * TOKEN
    assert [e["args"]["shard"] for e in got[1:3]] == [0, 1]
    # the client splits long spans into bounded requests with the same result
    names3 = ["TaskPosted", "TrainerEnrolled", "RoundOpened"]
    head = base.block_number()
    one = base.get_logs(base.deployment.deploy_block, head, names3, task_id=tid)
    assert base.get_logs(base.deployment.deploy_block, head, names3, task_id=tid, max_range=1) == one
    assert [e["event"] for e in one] == names
    with pytest.raises(Exception, match="has no event NoSuchEvent"):
        EventWatcher(base, ["NoSuchEvent"], tmp_path / "x.json")


def _wait_for(cond, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")
