"""The chain client's core: one connection and deployment, the start-up checks, RPC with bounded
retries and backoff (`RpcUnavailable` past them), block reads and view calls."""

from __future__ import annotations

import logging
import re
import threading
import time
from pathlib import Path
from typing import Any, Callable

import requests
from eth_account.signers.local import LocalAccount
from eth_utils import to_checksum_address
from web3 import HTTPProvider, Web3
from web3.exceptions import BlockNotFound, ContractLogicError, Web3RPCError

from tenzro_operator.chain.abi_decoding import ErrorDecoder, revert_data, to_named, why_failed
from tenzro_operator.chain.deployment import REGISTRY, TOKEN, load_deployment
from tenzro_operator.chain.records import RunView
from tenzro_operator.errors import ChainError, DeploymentError, RpcUnavailable
from tenzro_operator.permit import PermitDomain
from tenzro_operator.redact import redact_url, scrub

log = logging.getLogger("tenzro.chain")

CONNECTION_ERRORS = (requests.exceptions.ConnectionError, requests.exceptions.Timeout, ConnectionError)
_TRANSIENT_RPC = re.compile(r"rate limit|too many requests|busy|timeout|timed out|header not found|"
                            r"try again|temporarily unavailable|limit exceeded", re.I)


class RpcCore:
    """The connection, the deployment and RPC with retries: the base of `ChainClient` (its
    arguments are the client's)."""


    def __init__(self, rpc_url: str, deployments_path: str | Path, account: LocalAccount | None = None, *,
                 timeout_s: float = 10.0, retries: int = 5, backoff_s: float = 0.25, max_backoff_s: float = 4.0,
                 receipt_timeout_s: float = 60.0, poll_s: float = 0.05, check: bool = True,
                 replace_after_s: float | None = 20.0, max_fee_per_gas: int | None = None,
                 metrics: Any = None, _shared: "RpcCore | None" = None) -> None:
        self.rpc_url = rpc_url.rstrip("/")
        self.shown_url = redact_url(self.rpc_url)  # what messages, pages and logs show (no API key)
        self.replace_after_s, self.max_fee_per_gas = replace_after_s, max_fee_per_gas
        self.account = account
        self.retries = max(1, retries)
        self.backoff_s, self.max_backoff_s = backoff_s, max_backoff_s
        self.receipt_timeout_s, self.poll_s = receipt_timeout_s, poll_s
        self.metrics = metrics
        self._nonce_lock = threading.Lock()
        self._next_nonce: int | None = None
        self._permit_ok: bool | None = None  # supports_permit(), once asked
        self._permit_domain: PermitDomain | None = None
        if _shared is not None:
            self.w3, self.deployment, self.chain_id = _shared.w3, _shared.deployment, _shared.chain_id
            self._contracts, self._errors, self._events = _shared._contracts, _shared._errors, _shared._events
            return
        self.deployment = load_deployment(deployments_path)
        self.w3 = Web3(HTTPProvider(self.rpc_url, request_kwargs={"timeout": timeout_s},
                                    exception_retry_configuration=None))
        self.chain_id = self._rpc("eth_chainId", lambda: self.w3.eth.chain_id)
        if self.chain_id != self.deployment.chain_id:
            raise DeploymentError(f"{self.shown_url} is chain {self.chain_id} but {self.deployment.path} was "
                                  f"deployed on chain {self.deployment.chain_id}")
        self._contracts = {name: self.w3.eth.contract(address=rec.address, abi=rec.abi)
                           for name, rec in self.deployment.contracts.items()}
        self._errors = ErrorDecoder(rec.abi for rec in self.deployment.contracts.values())
        self._events = self._index_events()
        if check:
            self.check_deployment()

    # -- construction helpers -------------------------------------------------------------

    def with_account(self, account: LocalAccount | None) -> "RpcCore":
        """Another client on the same connection and deployment, signing as ``account``
        (its own nonce counter: use one client per account)."""
        return type(self)(self.rpc_url, self.deployment.path, account, retries=self.retries,
                           backoff_s=self.backoff_s, max_backoff_s=self.max_backoff_s,
                           receipt_timeout_s=self.receipt_timeout_s, poll_s=self.poll_s,
                           replace_after_s=self.replace_after_s, max_fee_per_gas=self.max_fee_per_gas,
                           metrics=self.metrics, _shared=self)

    def check_deployment(self) -> None:
        """Fail fast: the chain must be the one the record was written on (its block 0 hash, when
        the record has one: every fresh anvil has the same chain id and contract addresses, but its
        own genesis block), and code must exist at every recorded address (and at the verifier
        precompile)."""
        if self.deployment.genesis_hash:
            got = self.block_hash(0)
            if got.lower() != self.deployment.genesis_hash.lower():
                raise DeploymentError(
                    f"{self.shown_url} is not the chain {self.deployment.path} was deployed on: its block 0 is "
                    f"{got}, the record's {self.deployment.genesis_hash} (another devnet answers there, or the "
                    f"chain was reset): pass the right --rpc / TENZRO_NODE_RPC, or deploy again")
        targets = {name: rec.address for name, rec in self.deployment.contracts.items()}
        if self.deployment.verifier_precompile:
            targets["verifier precompile"] = to_checksum_address(self.deployment.verifier_precompile)
        for name, addr in targets.items():
            code = self._rpc("eth_getCode", lambda a=addr: self.w3.eth.get_code(a))
            if not code:
                raise DeploymentError(f"no contract code at {addr} ({name}) on {self.shown_url}; the chain was "
                                      f"reset or {self.deployment.path} is stale: deploy again")

    @property
    def address(self) -> str:
        """The signing account's checksummed address."""
        if self.account is None:
            raise ChainError("this chain client has no account (read-only): pass --keystore")
        return self.account.address

    @property
    def registry(self):
        return self.contract(REGISTRY)

    @property
    def token(self):
        return self.contract(TOKEN)

    def contract(self, name: str):
        """The web3 contract object of a deployed contract by name."""
        try:
            return self._contracts[name]
        except KeyError:
            raise DeploymentError(f"{self.deployment.path} has no contract {name!r}") from None

    # -- RPC with retries -----------------------------------------------------------------

    def _rpc(self, what: str, fn: Callable[[], Any]) -> Any:
        """Run one RPC operation; retry connection errors, timeouts, HTTP 429 / 5xx and JSON-RPC
        errors that say the node is busy or rate-limiting (`_TRANSIENT_RPC`) with exponential
        backoff (``backoff_s`` doubling up to ``max_backoff_s``, ``retries`` attempts in all).

        Raises:
            RpcUnavailable: still failing after the retries (the cause named).
            ChainError: an HTTP error that retrying will not mend (4xx other than 429).
            Web3RPCError / ContractLogicError: every other JSON-RPC error, for the caller to decode.
        """
        delay = self.backoff_s
        last: Exception | None = None
        for attempt in range(1, self.retries + 1):
            try:
                return fn()
            except (*CONNECTION_ERRORS, requests.exceptions.HTTPError) as exc:
                status = getattr(getattr(exc, "response", None), "status_code", None)
                if isinstance(exc, requests.exceptions.HTTPError) and (status is None or (status < 500
                                                                                          and status != 429)):
                    raise ChainError(f"RPC {what} to {self.shown_url} failed: HTTP {status}") from exc
                last = exc
            except Web3RPCError as exc:
                if isinstance(exc, ContractLogicError) or not _TRANSIENT_RPC.search(str(exc)):
                    raise
                last = exc
            if attempt == self.retries:
                break
            log.warning("RPC %s to %s failed (%s); retry %d/%d in %.2f s", what, self.shown_url,
                        scrub(why_failed(last), self.rpc_url), attempt, self.retries - 1, delay)
            time.sleep(delay)
            delay = min(delay * 2, self.max_backoff_s)
        raise RpcUnavailable(self.rpc_url, self.retries, f"{what}: {why_failed(last)}") from last

    def block_number(self) -> int:
        return self._rpc("eth_blockNumber", lambda: self.w3.eth.block_number)

    def block_hash(self, block: int | str = "latest") -> str:
        """0x-hex hash of a block (block 0: the chain's genesis, what tells two devnets apart)."""
        b = self._rpc("eth_getBlockByNumber", lambda: self.w3.eth.get_block(block))
        return "0x" + bytes(b["hash"]).hex()

    def block_header(self, block: int | str) -> dict[str, Any] | None:
        """``{"number", "hash", "parent_hash", "bloom", "timestamp"}`` of a block (hashes 0x-hex,
        ``bloom`` the ``logsBloom`` as an int, ``timestamp`` unix seconds), or None when this node
        does not have it (it lags behind the block, or a reorg removed it).

        Raises:
            RpcUnavailable: the node does not answer (after the retries).
        """
        try:
            b = self._rpc("eth_getBlockByNumber", lambda: self.w3.eth.get_block(block))
        except BlockNotFound:
            return None
        return {"number": int(b["number"]), "hash": "0x" + bytes(b["hash"]).hex(),
                "timestamp": int(b["timestamp"]),
                "parent_hash": "0x" + bytes(b["parentHash"]).hex(),
                "bloom": int.from_bytes(bytes(b["logsBloom"]), "big")}

    def block_timestamp(self, block: int | str = "latest") -> int:
        """Timestamp (unix seconds) of a block."""
        return int(self._rpc("eth_getBlockByNumber", lambda: self.w3.eth.get_block(block))["timestamp"])

    def next_block_time(self) -> int:
        """The earliest timestamp (unix seconds) the next block can carry: the later of the head
        block's and the pending block's (a node that builds one, as anvil does, stamps it with its
        own clock). The head alone runs behind on a chain with no block for a while (a devnet
        between transactions): a deadline counted from it may have passed when the transaction
        is mined. A node without a pending block gives the head's."""
        head = self.block_timestamp("latest")
        try:
            return max(head, self.block_timestamp("pending"))
        except (ChainError, Web3RPCError, ValueError, TypeError):
            return head

    def first_block_at(self, timestamp: int) -> int:
        """The first block at or after the deploy block whose timestamp (unix seconds) is >=
        ``timestamp``, by binary search (block timestamps never decrease): about log2(head -
        deploy block) ``eth_getBlockByNumber`` calls. Returns head + 1 when no block is that late.

        Used to start event scans of a run at its ``posted_at`` rather than at the deploy block
        (a block in the same second may come before the posting block: scans start early, never late).
        """
        lo, hi = self.deployment.deploy_block, self.block_number() + 1
        while lo < hi:
            mid = (lo + hi) // 2
            header = self.block_header(mid)  # None: a lagging node lacks it; searching earlier is safe
            if header is None or header["timestamp"] >= timestamp:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def run_start_block(self, run: "RunView") -> int:
        """First block to scan for the events of ``run``: `first_block_at` its ``posted_at``."""
        return self.first_block_at(run.posted_at) if run.posted_at else self.deployment.deploy_block

    def balance_eth(self, address: str | None = None) -> int:
        """Native balance in wei."""
        return self._rpc("eth_getBalance", lambda: self.w3.eth.get_balance(address or self.address))

    # -- calls ----------------------------------------------------------------------------

    def _fn(self, contract: str, method: str, *args: Any):
        c = self.contract(contract)
        try:
            return getattr(c.functions, method)(*args)
        except AttributeError:
            raise DeploymentError(f"{contract} in {self.deployment.path} has no function {method}") from None

    def call(self, method: str, *args: Any, contract: str = REGISTRY, block: int | str = "latest") -> Any:
        """A view call; raises `ChainRevert` with the decoded error if it reverts."""
        fn = self._fn(contract, method, *args)
        try:
            return self._rpc(f"{contract}.{method}", lambda: fn.call(block_identifier=block))
        except (ContractLogicError, Web3RPCError) as exc:
            data = revert_data(exc)
            if data is None and not isinstance(exc, ContractLogicError):
                raise ChainError(f"{contract}.{method} failed: {exc}") from None
            raise self._errors.decode(data, f"{contract}.{method}") from None

    def call_named(self, method: str, *args: Any, contract: str = REGISTRY) -> dict[str, Any]:
        """A view call whose outputs come back as a dict by ABI name (structs as dicts)."""
        value = self.call(method, *args, contract=contract)
        outputs = self._fn(contract, method, *args).abi["outputs"]
        values = (value,) if len(outputs) == 1 else tuple(value)
        return to_named(outputs, values)
