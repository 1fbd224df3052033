"""``--log-format json`` end to end: the `tenzro` CLI and a daemon (`tenzro trainer run`) as real
processes write one JSON object per log line on stderr. The lines come from a real failure: the
RPC endpoint is a free port nobody answers on, so the chain client logs its retries, then the
command ends with its one-line error."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from op_stack import PW_ENV
from stack import REPO, free_port


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tenzro_operator.cli", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env={**os.environ, **(env or {})})


def _json_lines(stderr: str) -> list[dict]:
    """Every stderr line but the final ``Error: ...`` one, each parsed as JSON (fails otherwise)."""
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert lines and lines[-1].startswith("Error: "), stderr
    return [json.loads(ln) for ln in lines[:-1]]


def test_cli_log_format_json(stack):
    dead = f"http://127.0.0.1:{free_port()}"
    res = _run("--log-format", "json", "--log-level", "WARNING", "train", "list-runs", "--rpc", dead,
               "--deployments", str(stack.deployments))
    assert res.returncode == 1
    logs = _json_lines(res.stderr)
    assert logs, res.stderr
    for rec in logs:
        assert rec["level"] == "WARNING" and rec["role"] == "cli" and rec["ts"].endswith("Z")
    assert any(dead in rec["msg"] and "retry" in rec["msg"] for rec in logs)
    # the variable works as well, and a bad value is refused by name
    res = _run("--log-level", "WARNING", "train", "list-runs", "--rpc", dead, "--deployments",
               str(stack.deployments), env={"TENZRO_LOG_FORMAT": "json"})
    assert _json_lines(res.stderr)
    res = _run("--log-format", "xml", "train", "list-runs")
    assert res.returncode == 2 and "--log-format" in res.stderr and "xml" in res.stderr


def test_daemon_log_format_json(stack, keystores, tmp_path):
    dead = f"http://127.0.0.1:{free_port()}"
    cfg = tmp_path / "trainer.yaml"
    cfg.write_text(f"node_rpc: {dead}\nipfs_api: {dead}\ndeployments: {stack.deployments}\n"
                   f"keystore: {keystores['t0']}\npassword_env: {PW_ENV}\ntask_id: never-posted\n"
                   f"did: did:tenzro:machine:t0\nmetrics_port: null\ndata_dir: {tmp_path / 'data'}\n"
                   "log_level: INFO\nlog_format: text\n")
    res = _run("trainer", "run", "--config", str(cfg), "--log-format", "json", env={PW_ENV: "pw"})
    assert res.returncode == 1, res.stderr
    logs = _json_lines(res.stderr)
    assert any(rec["role"] == "trainer" and rec["level"] == "WARNING" and dead in rec["msg"] for rec in logs)
    # the config's own field (here through its TENZRO_ variable) gives the same
    res = _run("trainer", "run", "--config", str(cfg), env={PW_ENV: "pw", "TENZRO_LOG_FORMAT": "json"})
    assert any(rec["role"] == "trainer" for rec in _json_lines(res.stderr))
