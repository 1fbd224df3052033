"""Fixtures of the replay tests: one devnet (anvil + the Helia IPFS node on free ports in a temp
dir), the contracts deployed on it, and sealed root-flow runs played by `run_driver` (honest and
faulty). Session-scoped: the runs are shared by the tests that read them. The driver moves the
devnet's clock forward (anvil time travel) through each commit phase and challenge window."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

import run_driver as drv
from stack import deploy_stack, free_port, fund
from tenzro_operator import devnet
from tenzro_operator.chain import ChainClient
from tenzro_operator.ipfs import IpfsClient
from tenzro_operator.keys import anvil_account


@dataclass
class Stack:
    rpc_url: str
    ipfs_url: str
    deployments: Path
    ipfs: IpfsClient

    def chain(self, account_index: int | None = None) -> ChainClient:
        acct = anvil_account(account_index) if account_index is not None else None
        return ChainClient(self.rpc_url, self.deployments, acct)


@pytest.fixture(scope="session")
def stack(tmp_path_factory):
    torch.set_num_threads(1)
    tmp = tmp_path_factory.mktemp("replay")
    cfg = devnet.DevnetConfig(data_dir=tmp / "devnet", rpc_port=free_port(), ipfs_port=free_port())
    devnet.up(cfg)
    try:
        dep = tmp / "deployments.json"
        deploy_stack(cfg.rpc_url, dep)
        fund(cfg.rpc_url, dep, [drv.SPONSOR, drv.SYNCER, *drv.TRAINERS, 5], 1_000_000 * drv.TOKEN)
        with IpfsClient(cfg.ipfs_url, timeout_s=20, retries=2) as ipfs:
            yield Stack(cfg.rpc_url, cfg.ipfs_url, dep, ipfs)
    finally:
        devnet.down(cfg)


@pytest.fixture(scope="session")
def dataset():
    return drv.small_dataset()


_runs: dict[str, drv.SealedRun] = {}


def _run(stack, dataset, name: str, **kw) -> drv.SealedRun:
    if name not in _runs:
        _runs[name] = drv.play_run(stack.rpc_url, stack.deployments, stack.ipfs, dataset, f"replay-{name}", **kw)
    return _runs[name]


@pytest.fixture(scope="session")
def honest_run(stack, dataset) -> drv.SealedRun:
    """2 trainers, 2 fragments, 2 rounds, Mean, all honest; both trainers claimed their rewards."""
    return _run(stack, dataset, "honest")


@pytest.fixture(scope="session")
def bad_hash_run(stack, dataset) -> drv.SealedRun:
    """Trainer 1 signs a wrong payloadHash for round 1 fragment 0; the syncer accepts it anyway."""
    return _run(stack, dataset, "bad-hash", faults=drv.Faults(bad_hash=(1, 0, 1)))


@pytest.fixture(scope="session")
def perturbed_run(stack, dataset) -> drv.SealedRun:
    """The syncer commits perturbed weights for round 0 fragment 1 (not the outer step of the
    aggregate), consistently with what it pinned; nobody proves it within the window."""
    return _run(stack, dataset, "perturbed", faults=drv.Faults(perturb=(0, 1)))


@pytest.fixture(scope="session")
def rejection_run(stack, dataset) -> drv.SealedRun:
    """K=1: trainer 1 delivers NaNs off-chain for round 0 fragment 1 (left out, NonFinite); trainer 0
    forces a NaN payload on-chain for round 1 fragment 0 (proven invalid, slashed, NonFinite)."""
    return _run(stack, dataset, "nan-rejected", quorum=1,
                faults=drv.Faults(nan=(0, 1, 1), forced_nan=(1, 0, 0)))
