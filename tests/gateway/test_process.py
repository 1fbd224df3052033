"""``tenzro gateway run --config gateway.yaml`` as a real process: it listens, answers, unlocks
its relayer keystore, stops cleanly on SIGTERM, and refuses a bad config in one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import yaml

from gw_stack import INVALID_PARAMS, Rpc
from stack import REPO
from tenzro_operator.keys import anvil_account

TENZRO = [sys.executable, "-m", "tenzro_operator.cli"]


def _write(path: Path, doc: dict) -> Path:
    path.write_text(yaml.safe_dump(doc))
    return path


def test_gateway_process_serves_and_stops_on_sigterm(tmp_path, chain, roles):
    from tenzro_operator.keys import create_keystore

    relayer = anvil_account(7)
    create_keystore(tmp_path / "relayer.json", "pw", relayer.key, scrypt_n=2**12)
    cfg = _write(tmp_path / "gateway.yaml", {
        "node_rpc": chain.rpc_url, "deployments": str(chain.deployments), "host": "127.0.0.1", "port": 0,
        "keystore": "relayer.json", "password_env": "GW_TEST_PW", "log_level": "WARNING", "max_request_bytes": 4096})
    env = dict(os.environ, GW_TEST_PW="pw")
    proc = subprocess.Popen([*TENZRO, "gateway", "run", "--config", str(cfg)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("gateway on http://127.0.0.1:"), (line, proc.stderr.read() if proc.poll() else "")
        rpc = Rpc(line.split()[2])
        assert rpc.http.get(rpc.url + "health").json()["relayer"] == relayer.address
        assert rpc.result("listRuns", {"limit": 1})["total"] == roles["base"].list_runs(0, 1)[1]
        assert rpc.error("getRun", {"task_id": "0x12"}, INVALID_PARAMS)
        r = rpc.post(b"[" + b" " * 5000 + b"]")  # the config's 4096-byte limit
        assert r.status_code == 413
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Traceback" not in err


def test_bad_config_is_one_line(tmp_path, chain):
    cfg = _write(tmp_path / "gateway.yaml", {"node_rpc": chain.rpc_url, "deployments": str(chain.deployments),
                                             "max_request_bytes": 0})
    res = subprocess.run([*TENZRO, "gateway", "run", "--config", str(cfg)], cwd=REPO, capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 1
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: config ") and "max_request_bytes" in lines[0], res.stderr
    missing = _write(tmp_path / "other.yaml", {"node_rpc": chain.rpc_url, "deployments": str(tmp_path / "none.json")})
    res = subprocess.run([*TENZRO, "gateway", "run", "--config", str(missing)], cwd=REPO, capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 1 and "Traceback" not in res.stderr and "none.json" in res.stderr
