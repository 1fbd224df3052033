"""Fixtures of the referee tests: an anvil of our own and ``Binary32Harness`` (contracts/mocks/)
compiled with solcx through this checkout's solc adapter and deployed on it. The harness is
called with raw ``eth_call``s whose ABI encoding is built with numpy (``referee_abi.py``):
eth-abi encodes a few hundred thousand values too slowly for a test that must stay short.
"""

from __future__ import annotations

import pytest
from web3 import HTTPProvider, Web3

from referee_abi import Harness
from stack import REPO, Anvil

SOLC = REPO / ".solc" / "solc-v0.8.28"  # this checkout's adapter, never ~/.solcx
HARNESS_SRC = "contracts/mocks/Binary32Harness.sol"


def compile_harness(via_ir: bool = False) -> dict:
    """abi and bytecodes of Binary32Harness, solc 0.8.28, optimizer 200 runs, cancun: forge's
    settings (foundry.toml) by default, ape's (ape-config.yaml) with ``via_ir=True``."""
    import solcx

    out = solcx.compile_standard(
        {
            "language": "Solidity",
            "sources": {HARNESS_SRC: {"urls": [str(REPO / HARNESS_SRC)]}},
            "settings": {
                "evmVersion": "cancun",
                "optimizer": {"enabled": True, "runs": 200},
                "viaIR": via_ir,
                "outputSelection": {"*": {"*": ["abi", "evm.bytecode.object"]}},
            },
        },
        solc_binary=str(SOLC),
        base_path=str(REPO),
        allow_paths=[str(REPO)],
    )
    return out["contracts"][HARNESS_SRC]["Binary32Harness"]


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """The machine's cores are shared: the canonical (torch) reference runs on one thread."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def anvil_url(tmp_path_factory):
    """An anvil of our own without the block gas limit for calls, so one eth_call can check tens
    of thousands of coordinates."""
    anvil = Anvil(tmp_path_factory.mktemp("anvil"), extra_args=["--disable-block-gas-limit"]).start()
    try:
        yield anvil.url
    finally:
        anvil.stop()


def deploy(url: str, art: dict) -> Harness:
    """Deploy a compiled harness from anvil's unlocked account 0."""
    w3 = Web3(HTTPProvider(url, request_kwargs={"timeout": 120}))
    tx = w3.eth.send_transaction({"from": w3.eth.accounts[0], "data": "0x" + art["evm"]["bytecode"]["object"],
                                  "gas": 10_000_000})
    rcpt = w3.eth.wait_for_transaction_receipt(tx, timeout=30)
    assert rcpt["status"] == 1, "deploying Binary32Harness failed"
    return Harness(w3, rcpt["contractAddress"], art["abi"])


@pytest.fixture(scope="module")
def harness(anvil_url) -> Harness:
    """Binary32Harness compiled as forge compiles it (legacy pipeline), deployed."""
    return deploy(anvil_url, compile_harness(via_ir=False))


@pytest.fixture(scope="module")
def harness_ir(anvil_url) -> Harness:
    """Binary32Harness compiled as ape compiles it (via-IR), deployed."""
    return deploy(anvil_url, compile_harness(via_ir=True))
