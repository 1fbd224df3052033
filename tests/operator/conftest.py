"""Fixtures of the operator tests: a real anvil on a free port, the contracts deployed on it, role
clients, a posted run, a real IPFS node. The helpers live in op_stack.py."""

from __future__ import annotations

import pytest

from op_stack import PW_ENV, ensure_syncer_stake, fresh_task_name, make_spec, post_root_run, small_dataset
from stack import MIN_SYNCER_STAKE, TOKEN, DevStack, free_port, funded_devnet
from tenzro_operator.keys import anvil_account


@pytest.fixture(scope="session")
def stack(tmp_path_factory) -> DevStack:
    """One anvil + deployed contracts for the whole session; accounts 1..9 hold 1,000,000 TNZO."""
    with funded_devnet(tmp_path_factory.mktemp("chain")) as s:
        yield s


@pytest.fixture
def fresh_stack(tmp_path) -> DevStack:
    """A stack of its own with anvil state persisted (survives `stack.anvil.restart()`)."""
    with funded_devnet(tmp_path, [1, 2, 3, 4], state=True) as s:
        yield s


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
    post_root_run(roles["sponsor"], spec)
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
    from tenzro_operator.ipfs.node import start_ipfs_node, stop_ipfs_node

    tmp = tmp_path_factory.mktemp("ipfs")
    proc = start_ipfs_node(tmp / "repo", free_port())
    try:
        yield proc.api_url
    finally:
        stop_ipfs_node(proc)


@pytest.fixture
def keystores(tmp_path):
    """Keystores (password "pw") of sponsor (anvil 1), syncer (2), t0 (3), t1 (4)."""
    from tenzro_operator.keys import create_keystore

    out = {}
    for role, idx in {"sponsor": 1, "syncer": 2, "t0": 3, "t1": 4}.items():
        p = tmp_path / f"{role}.json"
        create_keystore(p, "pw", anvil_account(idx).key, scrypt_n=2**12)
        out[role] = p
    return out


@pytest.fixture
def run_cli(stack, ipfs_url):
    """``run(*args, keystore=, rpc=, ipfs=, env=, common=True)``: the `tenzro` CLI in-process (click's
    CliRunner) against the session chain and IPFS node; ``common=False`` leaves the connection
    options out (to test their defaults)."""
    from click.testing import CliRunner

    from tenzro_operator.cli.main import cli

    runner = CliRunner()

    def run(*args, keystore=None, rpc=None, ipfs=None, env=None, common=True):
        argv = list(args)
        if common:
            argv += ["--rpc", rpc or stack.rpc_url, "--deployments", str(stack.deployments),
                     "--ipfs", ipfs or ipfs_url, "--password-env", PW_ENV]
        if keystore is not None:
            argv += ["--keystore", str(keystore)]
        return runner.invoke(cli, argv, env={PW_ENV: "pw", **(env or {})}, catch_exceptions=False)

    return run


@pytest.fixture
def real_spec(tmp_path, run_cli, keystores):
    """``make(**options)`` -> (TaskSpec, path): a runnable spec written by ``tenzro train new-spec``
    (dataset and initial weights really pinned on the session IPFS node; M=2, K=1, F=2, 2 rounds,
    sponsor anvil 1) with a fresh task id; ``options`` are more new-spec flags, e.g. ``rounds="1"``
    (``True``: a bare flag).
    The payloads are dense unless ``compression=...`` is given (new-spec's own default, MXFP4, is
    tested on its own)."""
    from tenzro_operator.spec import load_spec

    data = tmp_path / "data.csv"
    if not data.exists():
        small_dataset().to_csv(data, index=False)

    def make(**options):
        out = tmp_path / f"spec-{fresh_task_name('s')}.json"
        args = ["train", "new-spec", "--data", str(data), "--task-id", fresh_task_name(), "--out", str(out),
                "--trainers", "2", "--quorum", "1", "--fragments", "2", "--rounds", "2", "--inner-steps", "2"]
        for k, v in {"compression": "none", **options}.items():
            flag = f"--{k.replace('_', '-')}"
            if v is not None:  # None: leave the option out (new-spec's own default)
                args += [flag] if v is True else [flag, str(v)]
        res = run_cli(*args, keystore=keystores["sponsor"])
        assert res.exit_code == 0, res.output
        return load_spec(out), out

    return make
