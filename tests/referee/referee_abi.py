"""Fast calls of ``Binary32Harness`` (contracts/mocks/): Solidity ABI encoding and decoding of
``uint32[]`` arguments and results built with numpy (a 32-byte big-endian word per value), sent
as raw ``eth_call``s in batches. A module of its own, with a unique name, so that the test and
its conftest share it.

Example::

    h = Harness(w3, address, abi)
    out = h.binop("add", a_bits, b_bits)          # uint32 bit patterns in and out
    agg = h.aggregate(rule=1, values=v, counts=c, alpha_bps=1000)
"""

from __future__ import annotations

import numpy as np
from eth_utils import function_signature_to_4byte_selector
from web3 import Web3

CALL_GAS = 2**36  # per eth_call; anvil runs without the block gas limit for calls (conftest)
_U32 = "uint32[]"


def _word(v: int) -> bytes:
    return int(v).to_bytes(32, "big")


def _array(xs: np.ndarray) -> bytes:
    """ABI tail of a uint32[]: length, then each value right-aligned in a 32-byte word."""
    w = np.zeros((len(xs), 8), dtype=">u4")
    w[:, 7] = np.asarray(xs, dtype=np.uint32)
    return _word(len(xs)) + w.tobytes()


def encode(signature: str, *args) -> bytes:
    """Calldata of ``signature`` with args that are ints / bools (static words) or uint32 numpy
    arrays (dynamic ``uint32[]``), in the order of the signature."""
    head, tails = [], []
    tail_off = 32 * len(args)
    for a in args:
        if isinstance(a, np.ndarray):
            enc = _array(a)
            head.append(_word(tail_off))
            tails.append(enc)
            tail_off += len(enc)
        else:
            head.append(_word(int(a)))
    return function_signature_to_4byte_selector(signature) + b"".join(head) + b"".join(tails)


def decode_arrays(data: bytes, count: int) -> list[np.ndarray]:
    """The ``count`` uint32[] return values of a call (each value's upper 28 bytes must be 0)."""
    words = np.frombuffer(bytes(data), dtype=">u4").reshape(-1, 8)
    out = []
    for i in range(count):
        off = int(words[i, 7]) // 32
        n = int(words[off, 7])
        body = words[off + 1 : off + 1 + n]
        assert not body[:, :7].any(), "a returned uint32 has dirty upper bits"
        out.append(body[:, 7].astype(np.uint32))
    return out


class Harness:
    """A deployed Binary32Harness: batch calls on numpy uint32 bit patterns."""

    def __init__(self, w3: Web3, address: str, abi: list) -> None:
        self.w3 = w3
        self.address = address
        self.contract = w3.eth.contract(address=address, abi=abi)

    def raw_call(self, data: bytes) -> bytes:
        return bytes(self.w3.eth.call({"to": self.address, "data": data, "gas": CALL_GAS}))

    def binop(self, op: str, a: np.ndarray, b: np.ndarray, batch: int = 4096) -> np.ndarray:
        """fl(a op b) elementwise on the contract, op in add / sub / mul / div."""
        sig = f"{op}Batch({_U32},{_U32})"
        parts = [decode_arrays(self.raw_call(encode(sig, a[i : i + batch], b[i : i + batch])), 1)[0]
                 for i in range(0, len(a), batch)]
        return np.concatenate(parts) if parts else np.zeros(0, np.uint32)

    def aggregate(self, rule: int, values: np.ndarray, counts: np.ndarray, alpha_bps: int = 0,
                  batch_values: int = 10000) -> np.ndarray:
        """Referee.aggregate per coordinate: coordinate c has counts[c] consecutive values."""
        sig = f"aggregateBatch(uint8,{_U32},{_U32},uint16)"
        ends = np.cumsum(counts)
        out, c0 = [], 0
        while c0 < len(counts):
            start = int(ends[c0 - 1]) if c0 else 0
            c1 = max(c0 + 1, int(np.searchsorted(ends, start + batch_values, side="right")))
            stop = int(ends[c1 - 1])
            data = encode(sig, rule, values[start:stop], counts[c0:c1].astype(np.uint32), alpha_bps)
            out.append(decode_arrays(self.raw_call(data), 1)[0])
            c0 = c1
        return np.concatenate(out)

    def nesterov(self, p, m, g, lr: int, mu: int, on: bool, batch: int = 4096):
        """Referee.nesterov per coordinate -> (p_new, m_new) bit patterns."""
        sig = f"nesterovBatch({_U32},{_U32},{_U32},uint32,uint32,bool)"
        ps, ms = [], []
        for i in range(0, len(p), batch):
            s = slice(i, i + batch)
            pn, mn = decode_arrays(self.raw_call(encode(sig, p[s], m[s], g[s], lr, mu, on)), 2)
            ps.append(pn)
            ms.append(mn)
        return np.concatenate(ps), np.concatenate(ms)
