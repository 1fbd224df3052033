"""The chain client's log reading: events decoded by name from every deployed ABI, ranged and
by block hash (EIP-234), with the topic filters of one task."""

from __future__ import annotations

import re
from typing import Any, Iterable, Sequence

from eth_utils import keccak, to_checksum_address
from eth_utils.abi import abi_to_signature
from web3.exceptions import Web3RPCError

from tenzro_operator.chain.abi_decoding import normalize_event_args
from tenzro_operator.chain.deployment import REGISTRY
from tenzro_operator.chain.records import b32
from tenzro_operator.errors import DeploymentError

_UNKNOWN_BLOCK = re.compile(r"unknown block|block not found|not found block|missing block", re.I)


class EventLogs:
    """Log reading of `ChainClient`: events decoded by name, ranged or by block hash."""

    def _index_events(self) -> dict[bytes, tuple[str, str]]:
        idx: dict[bytes, tuple[str, str]] = {}
        for cname, rec in self.deployment.contracts.items():
            for item in rec.abi:
                if item.get("type") == "event" and not item.get("anonymous"):
                    idx[keccak(text=abi_to_signature(item))] = (cname, item["name"])
        return idx

    def event_topic(self, name: str, contract: str = REGISTRY) -> bytes:
        """topic0 of an event of a deployed contract."""
        for topic, (c, n) in self._events.items():
            if c == contract and n == name:
                return topic
        raise DeploymentError(f"{contract} in {self.deployment.path} has no event {name}")

    def decode_log(self, raw_log: Any) -> tuple[str, dict[str, Any]] | None:
        """(event name, args) of a raw log from a deployed contract, or None if unknown."""
        topics = raw_log["topics"]
        if not topics:
            return None
        entry = self._events.get(bytes(topics[0]))
        if entry is None:
            return None
        cname, ename = entry
        if to_checksum_address(raw_log["address"]) != self.deployment.contracts[cname].address:
            return None
        ev = getattr(self.contract(cname).events, ename)()
        data = ev.process_log(raw_log)
        return ename, normalize_event_args(data["args"])

    def decode_logs(self, raw_logs: Iterable[Any]) -> list[tuple[str, dict[str, Any]]]:
        out = []
        for lg in raw_logs:
            d = self.decode_log(lg)
            if d is not None:
                out.append(d)
        return out

    def get_logs(self, from_block: int, to_block: int, event_names: Sequence[str] | None = None,
                 contract: str = REGISTRY, task_id: bytes | None = None,
                 max_range: int = 5000) -> list[dict[str, Any]]:
        """``eth_getLogs`` over ``[from_block, to_block]`` (inclusive) for the contract, optionally
        only some events and one task (events whose first indexed topic is the task id: every
        registry event about a run; ``Withdrawn`` / ``Syncer*`` are keyed by address and never match).
        Long spans are split into requests of at most ``max_range`` blocks.

        Returns dicts ``{"event", "args", "block_number", "tx_hash", "log_index"}`` in chain order.
        """
        base = self._log_filter(event_names, contract, task_id)
        out = []
        start = max(0, from_block)
        while start <= to_block:
            end = min(to_block, start + max(1, max_range) - 1)
            flt = {**base, "fromBlock": start, "toBlock": end}
            out += self._decoded_logs(self._rpc("eth_getLogs", lambda f=flt: self.w3.eth.get_logs(f)))
            start = end + 1
        return out

    def get_logs_at(self, block_hash: str, event_names: Sequence[str] | None = None, contract: str = REGISTRY,
                    task_id: bytes | None = None) -> list[dict[str, Any]] | None:
        """``eth_getLogs`` of the one block with hash ``block_hash`` (EIP-234 ``blockHash`` filter),
        same filters and result shape as `get_logs`. A node that does not know the block answers an
        error instead of an empty list, so a lagging node, or a block a reorg removed, can not pass
        for a block without events: then None.

        Raises:
            RpcUnavailable: the node does not answer (after the retries).
        """
        flt = {**self._log_filter(event_names, contract, task_id), "blockHash": block_hash}
        try:
            raw = self._rpc("eth_getLogs", lambda: self.w3.eth.get_logs(flt))
        except Web3RPCError as exc:
            if _UNKNOWN_BLOCK.search(str(exc)):
                return None
            raise
        return self._decoded_logs(raw)

    def log_bloom_items(self, event_names: Sequence[str] | None = None, contract: str = REGISTRY,
                        task_id: bytes | None = None) -> list[bytes]:
        """What a block's ``logsBloom`` must contain for it to hold a log `get_logs` with these
        filters would return: the contract's address and the task id topic (event topics are
        alternatives, so they are left out)."""
        items = [bytes.fromhex(self.deployment.contracts[contract].address[2:])]
        if task_id is not None:
            items.append(b32(task_id))
        return items

    def _log_filter(self, event_names: Sequence[str] | None, contract: str, task_id: bytes | None) -> dict:
        topic0 = [("0x" + self.event_topic(n, contract).hex()) for n in event_names] if event_names else None
        topics: list[Any] = [topic0] if topic0 else [None]
        if task_id is not None:
            topics.append("0x" + b32(task_id).hex())
        return {"address": self.deployment.contracts[contract].address,
                "topics": topics if (topic0 or task_id is not None) else []}

    def _decoded_logs(self, raw: Iterable[Any]) -> list[dict[str, Any]]:
        out = []
        for lg in raw:
            d = self.decode_log(lg)
            if d is None:
                continue
            out.append({"event": d[0], "args": d[1], "block_number": lg["blockNumber"],
                        "block_hash": "0x" + bytes(lg["blockHash"]).hex(),
                        "tx_hash": "0x" + bytes(lg["transactionHash"]).hex(), "log_index": lg["logIndex"]})
        return out
