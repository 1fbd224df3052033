"""Helpers of the operator tests (imported by conftest.py and the tests; a unique module name so
it never collides with another suite's conftest): a real anvil on a free port, the real contracts deployed on it
(`stack.deploy_stack`: ape's build artifacts through web3, in the deployments JSON shape that
`ape run deploy` writes), and role accounts funded with TNZO."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import httpx

from stack import REPO

ANVIL = REPO / "node_modules/.bin/anvil"


def rpc_answers(url: str) -> bool:
    try:
        r = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}, timeout=1.0)
        return r.status_code == 200
    except httpx.HTTPError:
        return False


class Anvil:
    """An anvil process of our own; `restart()` keeps the chain when started with a state file.

    anvil binds ``--port 0`` itself and we read the port from its "Listening on" line, so a port
    taken by someone else's anvil (other suites run at the same time) can never be mistaken for ours.
    """

    def __init__(self, tmp: Path, state: bool = False) -> None:
        self.port: int | None = None
        self.state = tmp / "anvil-state.json" if state else None
        self.log = tmp / "anvil.log"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "Anvil":
        argv = [str(ANVIL), "--host", "127.0.0.1", "--port", str(self.port or 0)]
        if self.state is not None:
            argv += ["--state", str(self.state)]
        offset = self.log.stat().st_size if self.log.exists() else 0
        with open(self.log, "ab") as fh:
            self.proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            with open(self.log, "rb") as fh:
                fh.seek(offset)
                text = fh.read().decode(errors="replace")
            m = re.search(r"Listening on 127\.0\.0\.1:(\d+)", text)
            if m and self.proc.poll() is None:
                self.port = int(m.group(1))
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"anvil did not start: {text[-500:]}")
            time.sleep(0.05)
        while not rpc_answers(self.url):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"anvil on {self.url} does not answer")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # anvil dumps --state on SIGTERM
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def restart(self) -> None:
        """Stop and start again on the same port (and state file)."""
        self.stop()
        self.start()


EXAMPLE_SPEC = REPO / "operator/examples/task_spec.json"
_counter = {"n": 0}


def make_spec(**overrides):
    """The example spec with a fresh task id (the session chain is shared) and ``overrides``
    (``protocol`` updates metadata.protocol)."""
    from tenzro_operator.spec import parse_spec

    raw = json.loads(EXAMPLE_SPEC.read_text())
    _counter["n"] += 1
    raw["task_id"] = f"test-{os.getpid()}-{_counter['n']}-{time.time_ns()}"
    proto = overrides.pop("protocol", None)
    if proto:
        raw["metadata"]["protocol"].update(proto)
    raw.update(overrides)
    return parse_spec(raw)




def ensure_syncer_stake(client, bond: int, min_stake: int) -> None:
    """Make ``client``'s account a syncer candidate whose unlocked stake covers ``bond`` atto-units
    (the runs of the shared session chain are left unsealed, each holding a bond): registers
    ``max(min_stake, bond)`` the first time, else tops the stake up by the shortfall."""
    info = client.syncer_info()
    if not info.registered:
        client.register_syncer(max(min_stake, bond))
    elif info.free < bond:
        client.register_syncer(bond - info.free)
