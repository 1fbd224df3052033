"""`ChainClient`: the operator's one client of the chain, composed of the parts of this package
(each a class of the calls of one concern; they share the connection `RpcCore` opens)."""

from __future__ import annotations

from tenzro_operator.chain.event_logs import EventLogs
from tenzro_operator.chain.evidence_calls import TrainerEvidenceCalls
from tenzro_operator.chain.lifecycle import RunLifecycleCalls
from tenzro_operator.chain.rounds import RoundCalls
from tenzro_operator.chain.rpc import RpcCore
from tenzro_operator.chain.syncer_pool import SyncerPoolCalls
from tenzro_operator.chain.token_calls import TokenCalls
from tenzro_operator.chain.transactions import Transactions
from tenzro_operator.chain.registry_views import RegistryViews


class ChainClient(RegistryViews, RoundCalls, TrainerEvidenceCalls, RunLifecycleCalls, SyncerPoolCalls, TokenCalls,
                  EventLogs, Transactions, RpcCore):
    """The operator's view of the chain: registry, token, verifier (see the package docstring).

    Args:
        rpc_url: JSON-RPC endpoint (``http://127.0.0.1:8545``).
        deployments_path: ``deployments/<network>.json``.
        account: signing account (`tenzro_operator.keys.unlock`); None = read-only.
        timeout_s: HTTP timeout per RPC request (seconds).
        retries: attempts per RPC request on connection errors (>= 1).
        backoff_s: first retry delay; doubles up to ``max_backoff_s`` (seconds).
        receipt_timeout_s: how long to poll for a receipt (seconds).
        replace_after_s: a transaction not mined after this many seconds is sent again on the same
            nonce with fees bumped by 12.5 % (capped); None = never replace.
        max_fee_per_gas: fee cap in wei per gas (EIP-1559 ``maxFeePerGas``, legacy ``gasPrice``);
            None = no cap. A network asking more raises `FeeCapExceeded` (nothing is sent).
        check: run the start-up checks (chain id, code at every address).
        metrics: a `tenzro_operator.metrics.RoleMetrics` (tx counters), optional.
    Raises:
        RpcUnavailable: the endpoint does not answer after the retries.
        DeploymentError: bad record, wrong chain id, or no code at a recorded address.
    """
