"""Builds a gateway from its config: chain client, relayer, methods, dispatcher, server."""

from __future__ import annotations

from tenzro_operator.chain import ChainClient
from tenzro_operator.config import GatewayConfig
from tenzro_operator.gateway.jsonrpc import Dispatcher
from tenzro_operator.gateway.methods import TrainingMethods, chain_error
from tenzro_operator.gateway.relay import Relay
from tenzro_operator.gateway.server import GatewayServer

__all__ = ["build_gateway"]


def build_gateway(cfg: GatewayConfig, relayer_account=None) -> GatewayServer:
    """A `GatewayServer` (not started) for ``cfg``.

    Args:
        cfg: the gateway's config.
        relayer_account: the relayer's unlocked account; None = unlock ``cfg.keystore`` when set
            (password from ``cfg.password_env``, else a prompt), else no relayer.
    Raises:
        RpcUnavailable: the chain node does not answer.
        DeploymentError: the deployment record is missing or not this chain's.
        KeystoreError: the relayer keystore cannot be unlocked.
    """
    chain = ChainClient(cfg.node_rpc, cfg.deployments, retries=3, backoff_s=0.25,
                        receipt_timeout_s=cfg.receipt_timeout_s)
    if relayer_account is None and cfg.keystore is not None:
        from tenzro_operator.keys import unlock

        relayer_account = unlock(cfg.keystore, cfg.password_env)
    relayer = None
    if relayer_account is not None:
        relayer = chain.with_account(relayer_account)
        relayer.max_fee_per_gas = cfg.max_fee_per_gas_wei
        relayer.replace_after_s = cfg.tx_replace_after_s
    methods = TrainingMethods(chain, Relay(chain, cfg.preflight, cfg.receipt_timeout_s), relayer)
    dispatcher = Dispatcher(methods.table(), cfg.max_batch, chain_error, writes=methods.writes())
    health = {"chain_id": chain.chain_id, "registry": chain.registry.address,
              "relayer": relayer.address if relayer is not None else None,
              "methods": sorted(dispatcher.methods)}
    return GatewayServer(dispatcher, cfg.host, cfg.port, cfg.max_request_bytes, health,
                         max_connections=cfg.max_connections, read_timeout_s=cfg.read_timeout_s,
                         read_workers=cfg.read_workers, write_workers=cfg.write_workers)
