"""Helpers of the operator tests (imported by conftest.py and the tests; a unique module name so
it never collides with another suite's conftest): a real anvil on a free port, the real contracts deployed on it
(`stack.deploy_stack`: ape's build artifacts through web3, in the deployments JSON shape that
`ape run deploy` writes), and role accounts funded with TNZO."""

from __future__ import annotations

import json
import os
import time

from stack import (  # noqa: F401  (re-exported for the operator tests)
    REPO,
    Anvil,
    ensure_syncer_stake,
    force_commit,
    past_commit_phase,
    small_dataset,
)

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


def post_root_run(sponsor, spec, spec_cid: str = "bafyspec"):
    """Post ``spec`` from ``sponsor`` (a `ChainClient`) and put the run in the root flow with an
    arbitrary initial fragments root (the example spec's weights are not on the test node, and
    these tests commit rounds by hand and prove nothing). Returns the task id (bytes32)."""
    from tenzro_operator.root_flow import outer_rule

    sponsor.post_task(spec, spec_cid)
    sponsor.use_root_flow(spec.task_id_bytes, b"\x01" * 32, outer_rule(spec))
    return spec.task_id_bytes
