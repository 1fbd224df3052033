"""Fixtures of the operator tests: a real anvil on a free port, the contracts deployed on it, role
clients, a posted run, a real IPFS node. The helpers live in op_stack.py."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from op_stack import Anvil, ensure_syncer_stake, make_spec
from stack import fund
from stack import MIN_SYNCER_STAKE, TOKEN, deploy_stack, free_port
from tenzro_operator.keys import anvil_account


@dataclass
class Stack:
    anvil: Anvil
    deployments: Path
    record: dict

    @property
    def rpc_url(self) -> str:
        return self.anvil.url


@pytest.fixture(scope="session")
def stack(tmp_path_factory) -> Stack:
    """One anvil + deployed contracts for the whole session; accounts 1..9 hold 1,000,000 TNZO."""
    tmp = tmp_path_factory.mktemp("chain")
    anvil = Anvil(tmp).start()
    try:
        dep = tmp / "deployments.json"
        record = deploy_stack(anvil.url, dep)
        fund(anvil.url, dep, list(range(1, 10)), 1_000_000 * TOKEN)
        yield Stack(anvil, dep, record)
    finally:
        anvil.stop()


@pytest.fixture
def fresh_stack(tmp_path) -> Stack:
    """A stack of its own with anvil state persisted (survives `stack.anvil.restart()`)."""
    anvil = Anvil(tmp_path, state=True).start()
    try:
        dep = tmp_path / "deployments.json"
        record = deploy_stack(anvil.url, dep)
        fund(anvil.url, dep, [1, 2, 3, 4], 1_000_000 * TOKEN)
        yield Stack(anvil, dep, record)
    finally:
        anvil.stop()


@pytest.fixture
def roles(stack):
    """Chain clients of the roles on the session stack: sponsor (anvil 1), syncer (2), trainers (3, 4, 5)."""
    from tenzro_operator.chain import ChainClient

    base = ChainClient(stack.rpc_url, stack.deployments)
    return {
        "base": base,
        "sponsor": base.with_account(anvil_account(1)),
        "syncer": base.with_account(anvil_account(2)),
        "trainers": [base.with_account(anvil_account(i)) for i in (3, 4, 5)],
    }


@pytest.fixture
def running_task(roles):
    """A posted run (M=2, K=1, F=2, 2 rounds) with trainers 3 and 4 enrolled (the second opens
    round 0) and then a syncer elected (two steps: request, elect): round 0 is open.
    Returns (spec, task id bytes)."""
    spec = make_spec()
    roles["sponsor"].post_task(spec, "bafyspec")
    syncer = roles["syncer"]
    ensure_syncer_stake(syncer, spec.syncer_bond_atto, MIN_SYNCER_STAKE)
    tid = spec.task_id_bytes
    for t in roles["trainers"][:2]:
        t.enroll_trainer(tid, 100 * TOKEN, f"did:tenzro:machine:{t.address}")
    assert syncer.run_syncer_election(tid) == syncer.address  # the only candidate
    return spec, tid


@pytest.fixture(scope="session")
def ipfs_url(tmp_path_factory) -> str:
    """A real IPFS node (the project's Helia node) on a free port for the session."""
    from tenzro_operator.ipfs_node import start_ipfs_node, stop_ipfs_node

    tmp = tmp_path_factory.mktemp("ipfs")
    proc = start_ipfs_node(tmp / "repo", free_port())
    try:
        yield proc.api_url
    finally:
        stop_ipfs_node(proc)
