"""Fixtures of the gateway tests: the session devnet (a real anvil on a free port with the real
contracts deployed, `stack.deploy_stack`; accounts 1..9 hold 1,000,000 TNZO), role clients, and
in-process gateways bound to free ports (one with a relayer, one without, one that relays without
simulating first). Helpers live in gw_stack.py."""

from __future__ import annotations

import pytest

from stack import DevStack, funded_devnet
from tenzro_operator.keys import anvil_account

SPONSOR, SYNCER, T0, T1, OUTSIDER, RELAYER = 1, 2, 3, 4, 5, 6


@pytest.fixture(scope="session")
def chain(tmp_path_factory) -> DevStack:
    with funded_devnet(tmp_path_factory.mktemp("gw-chain")) as s:
        yield s


@pytest.fixture(scope="session")
def roles(chain):
    """Chain clients: base (read-only), sponsor, syncer, t0, t1, outsider (enrolled nowhere)."""
    from tenzro_operator.chain import ChainClient

    base = ChainClient(chain.rpc_url, chain.deployments)
    acct = base.with_account
    return {"base": base, "sponsor": acct(anvil_account(SPONSOR)), "syncer": acct(anvil_account(SYNCER)),
            "t0": acct(anvil_account(T0)), "t1": acct(anvil_account(T1)), "outsider": acct(anvil_account(OUTSIDER))}


def _gateway(chain, relayer: bool = True, **cfg):
    from tenzro_operator.config import GatewayConfig
    from tenzro_operator.gateway.app import build_gateway

    config = GatewayConfig(node_rpc=chain.rpc_url, deployments=chain.deployments, port=0, **cfg)
    return build_gateway(config, anvil_account(RELAYER) if relayer else None).start()


@pytest.fixture(scope="session")
def gateway(chain):
    """The gateway with a relayer (anvil 6), max request 64 KiB, batches of at most 8."""
    server = _gateway(chain, max_request_bytes=64 * 1024, max_batch=8)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def bare_gateway(chain):
    """A gateway without a relayer that relays signed transactions without simulating them."""
    server = _gateway(chain, relayer=False, preflight=False)
    yield server
    server.stop()


@pytest.fixture
def rpc(gateway):
    from gw_stack import Rpc

    return Rpc(gateway.url)
