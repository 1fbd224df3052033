"""Gas of a run, per round, from the receipts of every transaction the run's accounts sent.

Every transaction mined between the block the task was posted in and the seal is read with
its receipt (``gasUsed``: intrinsic gas and calldata included). A registry call of this task
that names a round (``commitSubmission``, ``submitOuterGradient``, ``commitRound``, a proof or
challenge, or whatever call a later protocol adds with a ``round`` argument, top level or inside a
struct) counts for
that round; every other transaction sent by one of the run's accounts (enrollment, approvals,
election, seal, fee claim, withdrawals) counts once for the run.

    gas = run_gas(chain, task_id, posted_block, chain.block_number(), accounts)
    gas.rounds[0]["gas"], gas.rounds[0]["by_method"]["commitRound"], gas.per_run
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tenzro_operator.chain import ChainClient

__all__ = ["RunGas", "run_gas"]


@dataclass
class RunGas:
    """Gas used by one run (units of gas).

    Attributes:
        rounds: round -> {"gas", "txs", "by_method": {method: {"txs", "gas"}}}.
        per_run: gas of the run's transactions that belong to no round.
        per_run_by_method: method -> {"txs", "gas"} of those.
    """

    rounds: dict[int, dict[str, Any]] = field(default_factory=dict)
    per_run: int = 0
    per_run_by_method: dict[str, dict[str, int]] = field(default_factory=dict)


def _find(args: Any, key: str) -> Any:
    """``args[key]``, or the first ``key`` inside a struct argument; None if absent."""
    if isinstance(args, dict):
        if key in args:
            return args[key]
        for v in args.values():
            found = _find(v, key)
            if found is not None:
                return found
    return None


def _add(table: dict[str, dict[str, int]], method: str, gas: int) -> None:
    row = table.setdefault(method, {"txs": 0, "gas": 0})
    row["txs"] += 1
    row["gas"] += gas


def _decode(chain: ChainClient, to: str | None, data: bytes) -> tuple[str, dict]:
    """(method name, arguments) of a call to one of the deployed contracts; ("?", {}) otherwise."""
    for name, rec in chain.deployment.contracts.items():
        if to is not None and to.lower() == rec.address.lower():
            try:
                fn, args = chain.contract(name).decode_function_input(data)
            except ValueError:
                return f"{name}.?", {}
            return fn.fn_name, dict(args)
    return "transfer" if not data else "?", {}


def _plain(v: Any) -> Any:
    """web3's AttributeDict / tuples of decoded structs as plain dicts and lists."""
    if hasattr(v, "items"):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


def run_gas(chain: ChainClient, task_id: bytes, from_block: int, to_block: int, accounts: set[str]) -> RunGas:
    """Read every transaction of blocks ``from_block``..``to_block`` and its receipt; attribute
    this task's round-bound registry calls to their round, the rest sent by ``accounts``
    (addresses, any case) to the run.

    Returns:
        `RunGas` (gas units).
    """
    mine = {a.lower() for a in accounts}
    out = RunGas()
    w3 = chain.w3
    for n in range(from_block, to_block + 1):
        block = w3.eth.get_block(n, full_transactions=True)
        for tx in block["transactions"]:
            method, args = _decode(chain, tx["to"], bytes(tx["input"]))
            args = _plain(args)
            tid = _find(args, "taskId")
            ours = tid is not None and bytes(tid) == task_id
            if not ours and tx["from"].lower() not in mine:
                continue
            gas = int(w3.eth.get_transaction_receipt(tx["hash"])["gasUsed"])
            r = _find(args, "round") if ours else None
            if r is None:
                out.per_run += gas
                _add(out.per_run_by_method, method, gas)
                continue
            row = out.rounds.setdefault(int(r), {"gas": 0, "txs": 0, "by_method": {}})
            row["gas"] += gas
            row["txs"] += 1
            _add(row["by_method"], method, gas)
    return out
