"""JSON-RPC 2.0 envelopes over real HTTP: parse errors, invalid requests, unknown methods, bad
params, batches mixing good and bad calls, notifications, and the request size limit."""

from __future__ import annotations

import json

import httpx

from gw_stack import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, REQUEST_TOO_LARGE, REVERTED

UNKNOWN = "0x" + "ab" * 32


def test_parse_error_and_invalid_requests(rpc):
    r = rpc.post(b'{"jsonrpc": "2.0", "method": ')
    assert r.status_code == 200
    assert r.json()["id"] is None and r.json()["error"]["code"] == PARSE_ERROR
    for bad, why in [(42, "JSON object"), ({"jsonrpc": "1.0", "id": 3, "method": "x"}, '"jsonrpc"'),
                     ({"jsonrpc": "2.0", "id": 4}, '"method"'),
                     ({"jsonrpc": "2.0", "id": 5, "method": "tenzro_training_listRuns", "params": 7}, '"params"'),
                     ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "tenzro_training_listRuns"}, '"id"'), ([], "empty")]:
        resp = rpc.post(bad).json()
        assert resp["error"]["code"] == INVALID_REQUEST, (bad, resp)
        assert why in resp["error"]["message"]
        valid_id = isinstance(bad, dict) and isinstance(bad.get("id"), int)
        assert resp["id"] == (bad["id"] if valid_id else None)  # echoed when it can be read


def test_unknown_method_and_bad_params(rpc):
    err = rpc.error("stealFunds", {}, METHOD_NOT_FOUND)
    assert "tenzro_training_getRun" in err["data"]["methods"] and len(err["data"]["methods"]) == 7
    assert rpc.error("getRun", {}, INVALID_PARAMS)["data"]["params"] == ["task_id", "trainers?"]  # missing
    rpc.error("getRun", {"task_id": UNKNOWN, "colour": "red"}, INVALID_PARAMS)  # unknown name
    rpc.error("getRun", [UNKNOWN, True, 3], INVALID_PARAMS)  # too many positional
    err = rpc.error("getRun", {"task_id": "0x1234"}, INVALID_PARAMS)  # hex, but not 32 bytes
    assert "64" in err["message"]
    rpc.error("getRun", {"task_id": 12}, INVALID_PARAMS)
    rpc.error("getRun", {"task_id": UNKNOWN, "trainers": "yes"}, INVALID_PARAMS)
    assert rpc.error("listRuns", {"limit": 0}, INVALID_PARAMS)["data"]["param"] == "limit"
    rpc.error("listRuns", {"offset": -1}, INVALID_PARAMS)
    rpc.error("listRuns", {"offset": "ten"}, INVALID_PARAMS)
    rpc.error("postTask", {"raw_transaction": "0xzz"}, INVALID_PARAMS)
    rpc.error("postTask", {"raw_transaction": "0x" + "c0ffee" * 10}, INVALID_PARAMS)  # hex, not a transaction
    sub = {"task_id": UNKNOWN, "round": 0, "fragment": 70000, "payload_root": "0x" + "00" * 32, "payload_sumsq": 0,
           "cid": "bafy", "payload_hash": "0x" + "00" * 32, "signature": "0x" + "00" * 65}
    assert rpc.error("submitGradient", sub, INVALID_PARAMS)["data"]["param"] == "fragment"


def test_positional_params_work_like_named(rpc, roles):
    named = rpc.result("listRuns", {"offset": 0, "limit": 3})
    assert rpc.result("listRuns", [0, 3]) == named
    assert rpc.result("listRuns") == rpc.result("listRuns", {})
    assert named["total"] == roles["base"].list_runs(0, 1)[1]


def test_batch_mixes_good_and_bad_calls(rpc):
    batch = [
        {"jsonrpc": "2.0", "id": "a", "method": "tenzro_training_listRuns", "params": {"limit": 1}},
        {"jsonrpc": "2.0", "id": "b", "method": "tenzro_training_nope"},
        {"jsonrpc": "2.0", "method": "tenzro_training_listRuns"},  # a notification: no answer
        {"jsonrpc": "2.0", "id": "c", "method": "tenzro_training_getRun", "params": {"task_id": UNKNOWN}},
        {"jsonrpc": "2.0", "id": "d", "method": "tenzro_training_getRun", "params": {"task_id": "0x12"}},
        {"jsonrpc": "1.0", "id": "e", "method": "tenzro_training_listRuns"},
        "not a request",
    ]
    r = rpc.post(batch)
    assert r.status_code == 200
    out = r.json()
    assert [x["id"] for x in out] == ["a", "b", "c", "d", "e", None]
    assert "total" in out[0]["result"]
    assert [x["error"]["code"] for x in out[1:]] == [METHOD_NOT_FOUND, REVERTED, INVALID_PARAMS, INVALID_REQUEST,
                                                     INVALID_REQUEST]
    assert out[2]["error"]["data"]["error"] == "Registry__UnknownTask"


def test_notifications_only_and_batch_limit(rpc):
    r = rpc.post([{"jsonrpc": "2.0", "method": "tenzro_training_listRuns"}])
    assert r.status_code == 204 and r.content == b""
    many = [{"jsonrpc": "2.0", "id": i, "method": "tenzro_training_listRuns"} for i in range(9)]
    resp = rpc.post(many).json()
    assert isinstance(resp, dict) and resp["error"]["code"] == INVALID_REQUEST
    assert resp["error"]["data"] == {"limit": 8, "got": 9}


def test_oversized_request_is_an_error_not_a_crash(rpc, gateway):
    limit = gateway.max_request_bytes
    pad = "x" * limit
    big = {"jsonrpc": "2.0", "id": 1, "method": "tenzro_training_listRuns", "params": {"pad": pad}}
    r = rpc.post(big)
    assert r.status_code == 413
    assert r.json() == {"jsonrpc": "2.0", "id": None, "error": {
        "code": REQUEST_TOO_LARGE, "message": r.json()["error"]["message"], "data": {"limit_bytes": limit}}}

    def chunks():  # streamed without a Content-Length: counted as it arrives
        yield b'{"jsonrpc": "2.0", "id": 1, "method": "tenzro_training_listRuns", "params": {"pad": "'
        for _ in range(limit // 4096 + 1):
            yield b"y" * 4096
        yield b'"}}'

    r = httpx.post(gateway.url, content=chunks(), timeout=30)
    assert r.status_code == 413 and r.json()["error"]["code"] == REQUEST_TOO_LARGE
    # a body just under the limit is read and answered (here: the unknown param)
    ok = {"jsonrpc": "2.0", "id": 2, "method": "tenzro_training_listRuns", "params": {"pad": ""}}
    ok["params"]["pad"] = "x" * (limit - len(json.dumps(ok)) - 1)
    assert len(json.dumps(ok)) == limit - 1
    r = rpc.post(ok)
    assert r.status_code == 200 and r.json()["error"]["code"] == INVALID_PARAMS
    assert rpc.result("listRuns", {"limit": 1})["offset"] == 0  # still serving


def test_health(gateway, roles):
    h = httpx.get(gateway.url + "health").json()
    assert h["ok"] is True and h["chain_id"] == roles["base"].chain_id
    assert h["registry"] == roles["base"].registry.address and h["relayer"] is not None
