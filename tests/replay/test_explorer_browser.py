"""`tenzro explorer` in a real headless Chromium during a live devnet run.

The replay suite's devnet (anvil + the Helia IPFS node) and run driver play a root-flow run of 3
rounds while the explorer serves it (``--refresh 1``) and tests/browser/watch_run.mjs keeps its
page open in Chromium (npm ``@sparticuz/chromium``, driven by ``playwright-core``; no download).
The browser never reloads by itself: the page's own ``<meta http-equiv="refresh">`` does, and each
load is read back. The run waits after its post and after each ``commitRound`` until the browser
has shown that state, so the test sees every round appear as it is committed (the page's
"finalized" column); at the end the figures on the page (rounds' accepted counts and weights
roots, each trainer's submissions, acceptances, credits and reward) are checked against the
chain: the registry's getters and the run's ``RoundCommitted`` and ``RootRunSealed`` events."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time

import pytest

import run_driver as drv
from browser_page import node, node_env, watch_command
from explorer_proc import explorer_process
from stack import REPO
from tenzro_operator.units import format_tokens

ROUNDS = 3


class Watcher:
    """The browser script as a subprocess; its JSON lines collected by a reader thread."""

    def __init__(self, url: str, timeout_s: float) -> None:
        self.snaps: list[dict] = []
        self.done: dict | None = None
        self._cv = threading.Condition()
        self.proc = subprocess.Popen(watch_command(url, timeout_s), cwd=REPO, env=node_env(), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            msg = json.loads(line)
            with self._cv:
                if "done" in msg:
                    self.done = msg
                else:
                    self.snaps.append(msg)
                self._cv.notify_all()
        with self._cv:
            self._cv.notify_all()

    def wait_for(self, what: str, pred, timeout_s: float) -> dict:
        """The first snapshot satisfying ``pred``; fails after ``timeout_s`` seconds or if the
        browser script ended."""
        deadline = time.monotonic() + timeout_s
        with self._cv:
            while True:
                hit = next((s for s in self.snaps if pred(s)), None)
                if hit is not None:
                    return hit
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._reader.is_alive()):
                    raise AssertionError(f"the browser never showed {what}; last page: "
                                         f"{self.snaps[-1] if self.snaps else None}; stderr: {self.stderr()}")
                self._cv.wait(min(left, 0.5))

    def stderr(self) -> str:
        if self.proc.poll() is None:
            return "(running)"
        return self.proc.stderr.read()[-2000:]

    def finish(self, timeout_s: float) -> None:
        try:
            self.proc.wait(timeout_s)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(10)
        self._reader.join(10)


@pytest.fixture
def live_explorer(stack):
    """Base URL of `tenzro explorer --refresh 1` on a free port."""
    with explorer_process(stack, "--refresh", "1") as url:
        yield url


def _finalized(snap: dict) -> int:
    return sum(1 for r in snap["rounds"] if r["finalized"])


@pytest.mark.slow
def test_live_run_page_in_chromium_shows_rounds_as_they_are_committed(stack, dataset, live_explorer):
    node(), node_env()  # fail at once, with what to run, when Node or the browser packages are missing
    name = f"browser-live-{os.getpid()}-{time.time_ns()}"
    watcher: dict[str, Watcher] = {}
    failure: list[BaseException] = []
    result: dict[str, drv.SealedRun] = {}

    def paced(step: str, rnd: int) -> None:
        if step == "posted":  # open the page while the run is live, before any round
            w = watcher["w"] = Watcher(f"{live_explorer}/runs/{name}", timeout_s=600)
            w.wait_for("the posted run", lambda s: s["status"] in ("ENROLLING", "TRAINING"), 180)
        elif step == "committed":
            # 180 s as for the post: on a loaded CI host (load 10 on 2 cores) each page load reads the run
            # from the chain and IPFS for tens of seconds
            watcher["w"].wait_for(f"round {rnd} committed", lambda s: _finalized(s) == rnd + 1, 180)

    def play() -> None:
        try:
            result["run"] = drv.play_run(stack.rpc_url, stack.deployments, stack.ipfs, dataset, name,
                                         rounds=ROUNDS, on_progress=paced)
        except BaseException as exc:  # noqa: BLE001 - re-raised on the test's thread
            failure.append(exc)

    runner = threading.Thread(target=play, daemon=True)
    runner.start()
    runner.join(900)
    assert not runner.is_alive(), "the run did not finish in 15 minutes"
    w = watcher.get("w")
    if failure:  # the run's own error, not the browser script's: stopped at once, its timeout not waited for
        if w is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                w.finish(1)
        raise failure[0]
    w.finish(120)
    assert w.done == {"done": "sealed", "loads": w.done["loads"], "ms": w.done["ms"]}, (w.done, w.stderr())

    snaps = w.snaps
    first, last = snaps[0], snaps[-1]
    assert first["status"] in ("ENROLLING", "TRAINING") and first["refresh"] is True
    assert _finalized(first) == 0
    counts = [_finalized(s) for s in snaps]
    assert counts == sorted(counts), counts  # rounds only ever appear
    assert set(range(ROUNDS + 1)) <= set(counts), counts  # each round was seen on its own
    loads = [s["load"] for s in snaps]
    assert loads == sorted(loads) and len(set(loads)) == len(loads) and loads[-1] > 1  # the page's own reloads
    assert last["status"] == "SEALED" and last["refresh"] is False
    assert last["round"] == f"{ROUNDS} of {ROUNDS}"

    chain = stack.chain()
    task_id = result["run"].task_id
    assert [r["weights_root"] for r in last["rounds"]] == ["0x" + h.hex() for h in result["run"].weights_roots]
    events = drv.committed(chain, task_id)
    for r, row in enumerate(last["rounds"]):
        rec = chain.get_round(task_id, r)
        assert row["round"] == r and row["finalized"]
        assert row["accepted"] == rec.accepted_count == 4  # 2 trainers x 2 fragments
        assert row["weights_root"] == "0x" + bytes(events[r]["weightsRoot"]).hex()  # getRound leaves it 0
        assert row["seconds"] is not None and row["seconds"] >= 0
    assert len(last["rounds"]) == ROUNDS
    order = chain.trainers_of(task_id)
    assert [t["trainer"].lower() for t in last["trainers"]] == [a.lower() for a in order]
    run = chain.get_run(task_id)
    (sealed,) = drv.events_named(chain, task_id, "RootRunSealed")
    for i, t in enumerate(last["trainers"]):
        bitmaps = [events[r]["acceptedBitmaps"][i] for r in range(ROUNDS)]
        accepted = sum(bin(b).count("1") for b in bitmaps)
        credits = sum(n for b in bitmaps for f, n in enumerate(run.fragment_sizes) if b >> f & 1)
        # every fragment delivered (the transcripts list them) and accepted
        assert (t["submitted"], t["accepted"], t["credits"]) == (2 * ROUNDS, accepted, str(credits))
        assert accepted == 2 * ROUNDS and credits == result["run"].credits[i]
        reward = sealed["claimable"] * credits // run.total_credits
        assert t["reward"] == format_tokens(reward) and t["slashed"] == format_tokens(0)
        assert t["state"] == "enrolled"
    # a page seen mid-run showed the chain's figures of that moment too: round 0 as committed
    mid = next(s for s in snaps if _finalized(s) == 1)
    assert mid["rounds"][0]["weights_root"] == last["rounds"][0]["weights_root"]
    assert mid["status"] == "TRAINING" and mid["refresh"] is True
