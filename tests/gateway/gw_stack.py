"""Helpers of the gateway tests (a unique module name, so no other suite's helpers shadow it):
a plain JSON-RPC client over httpx, users' signed registry transactions, fresh task specs."""

from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Any

import httpx

from stack import REPO

EXAMPLE_SPEC = REPO / "operator/examples/task_spec.json"
_counter = {"n": 0}

# the gateway's error codes (operator/RPC.md)
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
REVERTED, REQUEST_TOO_LARGE, TX_REJECTED, BAD_SIGNATURE, NO_RELAYER = -32000, -32001, -32002, -32003, -32004


class Rpc:
    """A plain JSON-RPC 2.0 client: ``call`` gives the whole response object."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx.Client(timeout=60.0)
        self._id = 0

    def post(self, body: Any, **kw) -> httpx.Response:
        """POST ``body`` (JSON-encoded unless bytes) as is."""
        content = body if isinstance(body, (bytes, str)) else json.dumps(body)
        return self.http.post(self.url, content=content, headers={"content-type": "application/json"}, **kw)

    def call(self, method: str, params: Any = None) -> dict[str, Any]:
        self._id += 1
        req = {"jsonrpc": "2.0", "id": self._id, "method": "tenzro_training_" + method}
        if params is not None:
            req["params"] = params
        r = self.post(req)
        assert r.status_code == 200, r.text
        resp = r.json()
        assert resp["id"] == self._id and resp["jsonrpc"] == "2.0"
        return resp

    def result(self, method: str, params: Any = None) -> Any:
        resp = self.call(method, params)
        assert "error" not in resp, resp["error"]
        return resp["result"]

    def error(self, method: str, params: Any = None, code: int | None = None) -> dict[str, Any]:
        resp = self.call(method, params)
        assert "result" not in resp, resp["result"]
        err = resp["error"]
        assert isinstance(err["message"], str) and "Traceback" not in err["message"]
        if code is not None:
            assert err["code"] == code, err
        return err


def fresh_spec(**overrides):
    """The example spec (M=2, K=1, F=2, 2 rounds, sponsor anvil 1) with a task id of its own."""
    from tenzro_operator.spec import parse_spec

    raw = json.loads(EXAMPLE_SPEC.read_text())
    _counter["n"] += 1
    raw["task_id"] = f"gw-{os.getpid()}-{_counter['n']}-{time.time_ns()}"
    raw.update(overrides)
    return parse_spec(raw)


def signed_tx(client, method: str, *args, to: str | None = None, chain_id: int | None = None,
              contract: str = "TrainingRegistry", gas: int = 3_000_000) -> str:
    """0x-hex of a transaction calling ``contract.method(*args)``, signed by ``client``'s account at
    its next nonce (``to`` / ``chain_id`` override the recipient and the chain: a forged one)."""
    fn = getattr(client.contract(contract).functions, method)(*args)
    tx = fn.build_transaction({"from": client.address, "gas": gas, "chainId": client.chain_id,
                               "nonce": client.w3.eth.get_transaction_count(client.address, "pending")})
    if to is not None:
        tx["to"] = to
    if chain_id is not None:
        tx["chainId"] = chain_id
    return "0x" + bytes(client.account.sign_transaction(tx).raw_transaction).hex()


def post_task_tx(client, spec) -> str:
    """The sponsor's signed ``postTaskWithPermit`` of ``spec`` (the pool authorized by a permit)."""
    params = client.task_params(spec, "bafyspec")
    sig = client.sign_permit(spec.reward_pool_atto)
    return signed_tx(client, "postTaskWithPermit", client._struct("postTask", 0, params), sig.deadline, sig.v,
                     sig.r, sig.s)


def enroll_tx(client, task_id: bytes, stake: int, permit: bool = True) -> str:
    """A trainer's signed ``enrollTrainerWithPermit`` (or plain ``enrollTrainer`` after approving)."""
    did = f"did:tenzro:machine:{client.address}"
    if not permit:
        client.approve(stake)
        return signed_tx(client, "enrollTrainer", task_id, stake, did)
    sig = client.sign_permit(stake)
    return signed_tx(client, "enrollTrainerWithPermit", task_id, stake, did, sig.deadline, sig.v, sig.r, sig.s)


def submission(trainer, task_id: bytes, round_: int, fragment: int, cid: str = "bafypayload") -> dict[str, Any]:
    """Params of ``submitGradient``: a made-up payload commitment signed (EIP-712) by ``trainer``
    over the run's current weights root."""
    from tenzro_operator.chain import SignedPayload

    body = f"{task_id.hex()}/{round_}/{fragment}/{cid}".encode()
    p = SignedPayload(hashlib.sha256(b"root" + body).digest(), 0x3F800000, cid, hashlib.sha256(body).digest())
    s = trainer.sign_outer_gradient(task_id, round_, fragment, p)
    return {"task_id": "0x" + task_id.hex(), "round": round_, "fragment": fragment,
            "payload_root": "0x" + s.payload_root.hex(), "payload_sumsq": s.payload_sumsq, "cid": s.cid,
            "payload_hash": "0x" + s.payload_hash.hex(), "signature": "0x" + s.signature.hex()}


def use_root_flow_tx(client, spec) -> str:
    """The sponsor's signed ``useRootFlow`` of posted ``spec`` (an arbitrary initial fragments root:
    these tests commit rounds by hand and prove nothing)."""
    from tenzro_operator.root_flow import outer_rule

    return signed_tx(client, "useRootFlow", spec.task_id_bytes, b"\x01" * 32, outer_rule(spec))


def commit_for(trainer, params: dict[str, Any]) -> None:
    """``trainer`` commits on-chain (``commitSubmission``, in the commit phase) to the submission
    ``params`` of `submission` signs: what the gateway's ``submitGradient`` then reveals."""
    from tenzro_operator.chain import SignedPayload
    from tenzro_operator.root_flow import RevealMessage

    tid = bytes.fromhex(params["task_id"][2:])
    sp = SignedPayload(bytes.fromhex(params["payload_root"][2:]), params["payload_sumsq"], params["cid"],
                       bytes.fromhex(params["payload_hash"][2:]), bytes.fromhex(params["signature"][2:]))
    base_root = trainer.get_run(tid).weights_root
    m = RevealMessage.of(tid, params["round"], params["fragment"], trainer.address, base_root, sp)
    trainer.commit_submission(tid, params["round"], params["fragment"], m.commitment())


def commit_round_tx(syncer, tid: bytes, round_: int, bitmaps: list[int], credits: list[int]) -> str:
    """The syncer's signed ``commitRound`` of round ``round_`` (made-up roots and hashes)."""
    h = [hashlib.sha256(f"{tid.hex()}/{round_}/{f}".encode()).digest() for f in range(2)]
    c = {"taskId": tid, "round": round_, "fragmentsRoot": hashlib.sha256(b"fragments%d" % round_).digest(),
         "acceptedBitmaps": bitmaps, "previousCredits": credits, "fragmentHashes": h,
         "transcriptHash": hashlib.sha256(f"t{round_}".encode()).digest(), "transcriptCid": f"bafyt{round_}",
         "unendorsedBitmaps": []}
    return signed_tx(syncer, "commitRound", syncer._struct("commitRound", 0, c))
