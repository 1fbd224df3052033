"""The chain: web3.py 7 over JSON-RPC, ABIs and addresses from ``deployments/<network>.json``.

Owns everything the operator says to and reads from the chain: the deployment record
(`deployment`), the registry's types and views (`records`), EIP-712 signing (`signing`), decoding
reverts and outputs by ABI name (`abi_decoding`), the connection and RPC retries (`rpc`),
transactions and nonces (`transactions`), log reading (`event_logs`) and the calls of each part of
the registry and the token, composed into one `ChainClient` (`client`); and the event cursor every
daemon reads the registry's events with, which neither a lagging node nor a reorg fools
(`event_cursor`). It must not import the
roles, the daemons, the CLI, IPFS or the trainer: they import it.

One `ChainClient` per (process, signing account). It

* checks at start-up that the RPC answers, that its chain id is the deployment's, and that
  code exists at every recorded address (fail fast, `DeploymentError`);
* estimates every transaction first and refuses what would revert, decoding custom errors
  by name from the ABIs of all deployed contracts into `ChainRevert(error_name, args)`;
* owns the account's nonce (a lock and a local counter, resynced from the node on a nonce
  error or a lost transaction) so several transactions can be in flight (`send` / `wait`);
* polls receipts for a bounded time (`TxFailed` past it), replacing a transaction that is not
  mined after ``replace_after_s`` by the same one on the same nonce with fees bumped by 12.5 %,
  never above the fee cap (``max_fee_per_gas``: `FeeCapExceeded` when the network asks more);
* never signs a call twice: after an uncertain broadcast (a lost response, a "nonce too low"
  for a transaction it may itself have sent) it looks the signed hash up on the node first;
* decodes a revert at mining time like an estimated one (`TxReverted`, a `ChainRevert`);
* pays for ``postTask`` / ``enrollTrainer`` with an ERC-2612 permit signed locally over the
  token's own EIP-712 domain (`spend`, `tenzro_operator.permit`): one transaction, no allowance
  left; a token without permits is approved first (`spend_approved`);
* retries connection errors, HTTP 429 / 5xx and JSON-RPC "busy" answers with exponential
  backoff, then raises `RpcUnavailable(url)`.

Amounts are ``int`` token atto-units everywhere; ``bytes32`` values are ``bytes`` (32 long);
addresses are checksummed strings. Times on-chain are unix seconds.
"""

from __future__ import annotations

from tenzro_operator.chain.abi_decoding import ErrorDecoder
from tenzro_operator.chain.client import ChainClient
from tenzro_operator.chain.deployment import (
    ESCROW,
    REGISTRY,
    TOKEN,
    VERIFIER,
    ContractRecord,
    Deployment,
    load_deployment,
    merged_abi,
)
from tenzro_operator.chain.records import (
    DEVNET_CHAIN_IDS,
    ELECTION_WINDOW_BLOCKS,
    ZERO_ADDRESS,
    ChunkOpening,
    PendingTx,
    RoundRecord,
    RunStatus,
    RunView,
    SignedPayload,
    SlashReason,
    SyncerInfo,
    TrainerStats,
    TrainingReceipt,
    TxResult,
    proof_commitment,
)
from tenzro_operator.chain.signing import (
    EIP712_DOMAIN_NAME,
    EIP712_DOMAIN_VERSION,
    outer_gradient_digest,
    outer_gradient_typed_data,
    registry_domain_separator,
    sign_outer_gradient,
    sign_submission_commitment,
    submission_commitment_digest,
)

__all__ = [
    "DEVNET_CHAIN_IDS",
    "EIP712_DOMAIN_NAME",
    "EIP712_DOMAIN_VERSION",
    "ELECTION_WINDOW_BLOCKS",
    "ESCROW",
    "REGISTRY",
    "TOKEN",
    "VERIFIER",
    "ZERO_ADDRESS",
    "ChainClient",
    "ChunkOpening",
    "ContractRecord",
    "Deployment",
    "ErrorDecoder",
    "PendingTx",
    "RoundRecord",
    "RunStatus",
    "RunView",
    "SignedPayload",
    "SlashReason",
    "SyncerInfo",
    "TrainerStats",
    "TrainingReceipt",
    "TxResult",
    "load_deployment",
    "merged_abi",
    "outer_gradient_digest",
    "outer_gradient_typed_data",
    "proof_commitment",
    "registry_domain_separator",
    "sign_outer_gradient",
    "sign_submission_commitment",
    "submission_commitment_digest",
]
