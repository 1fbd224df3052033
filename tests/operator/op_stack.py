"""Helpers of the operator tests (imported by conftest.py and the tests; a unique module name so
it never collides with another suite's conftest): a real anvil on a free port, the real contracts deployed on it
(`stack.deploy_stack`: ape's build artifacts through web3, in the deployments JSON shape that
`ape run deploy` writes), and role accounts funded with TNZO."""

from __future__ import annotations

import json
import os
import time

from stack import REPO, Anvil, ensure_syncer_stake, small_dataset  # noqa: F401  (re-exported for the operator tests)

EXAMPLE_SPEC = REPO / "operator/examples/task_spec.json"
PW_ENV = "TEST_TENZRO_PW"  # the variable the CLI tests keep keystore passwords in
_counter = {"n": 0}


def fresh_task_name(prefix: str = "test") -> str:
    """A task id no other test of the shared session chain uses."""
    _counter["n"] += 1
    return f"{prefix}-{os.getpid()}-{_counter['n']}-{time.time_ns()}"




def one_line_error(result) -> str:
    """The single ``Error: ...`` line of a CLI result that failed with exit code 1 (no traceback)."""
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1, result.output
    assert lines[0].startswith("Error: ")
    return lines[0]


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
