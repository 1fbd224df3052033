"""The transaction layer under transport faults and hostile fee markets, on anvil with the real
contracts, through `faultproxy.FaultProxy` in front of the real RPC endpoint (issue 14: H3, M2,
M3, M4). Each test is the fault first, then what the client must (not) do about it."""

from __future__ import annotations

import threading
import time

import pytest
from eth_account import Account

from faultproxy import FaultProxy
from stack import TOKEN
from tenzro_operator.chain import ChainClient
from tenzro_operator.errors import ChainRevert, FeeCapExceeded, RpcUnavailable, TxFailed, TxReverted
from tenzro_operator.keys import anvil_account

pytestmark = pytest.mark.timeout(120)


def _transfers_to(client: ChainClient, to: str) -> list[dict]:
    evs = client.get_logs(client.deployment.deploy_block, client.block_number(), ["Transfer"], contract="TenzroToken")
    return [e for e in evs if e["args"]["to"] == to]


def test_h3_lost_send_response_does_not_pay_twice(stack):
    """The node takes the transaction but its answer is lost: the retry hears "nonce too low".
    Before: the client re-signed the call with the next nonce and paid twice."""
    base = ChainClient(stack.rpc_url, stack.deployments)
    to = Account.create().address
    with FaultProxy(stack.rpc_url) as proxy:
        payer = ChainClient(proxy.url, stack.deployments, anvil_account(6), backoff_s=0.05)
        nonce0 = base.w3.eth.get_transaction_count(payer.address)
        rule = proxy.add("drop", method="eth_sendRawTransaction", times=1)
        res = payer.transfer_tokens(to, TOKEN)
        assert rule.fired == 1
        assert [a for _, a, _ in proxy.log].count("eth_sendRawTransaction") == 2  # sent, answer lost, sent again
    assert res.status == 1
    assert base.token_balance(to) == TOKEN  # paid once
    assert base.w3.eth.get_transaction_count(payer.address) == nonce0 + 1
    assert len(_transfers_to(base, to)) == 1
    # the nonce counter stays right: the next transfer is the next nonce and pays once more
    payer2 = ChainClient(stack.rpc_url, stack.deployments, anvil_account(6))
    payer2.transfer_tokens(to, TOKEN)
    assert base.token_balance(to) == 2 * TOKEN


def test_h3_endpoint_gone_after_broadcast_is_an_error_not_a_second_send(stack):
    """Every answer to the broadcast is lost (the endpoint is as good as down): the call fails with
    RpcUnavailable... unless the node shows the transaction, which is then the result."""
    base = ChainClient(stack.rpc_url, stack.deployments)
    to = Account.create().address
    with FaultProxy(stack.rpc_url) as proxy:
        payer = ChainClient(proxy.url, stack.deployments, anvil_account(6), backoff_s=0.01, retries=2)
        proxy.add("drop", method="eth_sendRawTransaction", times=None)
        pending = payer.send("transfer", to, TOKEN, contract="TenzroToken")  # found by its hash
        proxy.clear()
        res = payer.wait(pending)
    assert res.tx_hash == pending.tx_hash and base.token_balance(to) == TOKEN
    with FaultProxy(stack.rpc_url) as proxy:
        payer = ChainClient(proxy.url, stack.deployments, anvil_account(6), backoff_s=0.01, retries=2)
        proxy.add("status", status=503, method="eth_sendRawTransaction", times=None)  # never reaches the node
        with pytest.raises(RpcUnavailable, match="send transfer"):
            payer.send("transfer", to, TOKEN, contract="TenzroToken")
    assert base.token_balance(to) == TOKEN


def test_m2_revert_at_mining_time_is_decoded_like_an_estimate(stack):
    """A transaction that passes (here: skips) its estimate and reverts when mined comes back as a
    ChainRevert with the contract's error and arguments, not a bare TxFailed."""
    payer = ChainClient(stack.rpc_url, stack.deployments, anvil_account(6))
    to = Account.create().address
    too_much = payer.token_balance() + 1
    pending = payer.send("transfer", to, too_much, contract="TenzroToken", gas=120_000)
    with pytest.raises(ChainRevert) as err:
        payer.wait(pending)
    assert isinstance(err.value, TxReverted) and isinstance(err.value, TxFailed)
    assert err.value.error_name == "ERC20InsufficientBalance"
    assert err.value.args_["needed"] == too_much and err.value.tx_hash == pending.tx_hash
    assert "mined in tx" in str(err.value)


def test_m3_http_429_and_busy_json_rpc_errors_are_retried(stack):
    to = Account.create().address
    with FaultProxy(stack.rpc_url) as proxy:
        c = ChainClient(proxy.url, stack.deployments, anvil_account(6), backoff_s=0.01)
        r429 = proxy.add("status", status=429, method="eth_call", times=2)
        assert c.token_balance(to) == 0
        assert r429.fired == 2
        busy = proxy.add("rewrite", method="eth_blockNumber", times=2, fn=lambda req, ans: {
            "jsonrpc": "2.0", "id": req["id"], "error": {"code": -32005, "message": "rate limit exceeded"}})
        assert c.block_number() > 0 and busy.fired == 2
        proxy.add("status", status=429, method="eth_blockNumber", times=None)
        with pytest.raises(RpcUnavailable, match="eth_blockNumber"):
            c.block_number()


def test_m4_fee_cap_refuses_to_overpay(stack):
    payer = ChainClient(stack.rpc_url, stack.deployments, anvil_account(6), max_fee_per_gas=1)
    nonce0 = payer.w3.eth.get_transaction_count(payer.address)
    with pytest.raises(FeeCapExceeded, match="max_fee_per_gas=1"):
        payer.transfer_tokens(Account.create().address, TOKEN)
    assert payer.w3.eth.get_transaction_count(payer.address) == nonce0  # nothing sent


def test_m4_stuck_transaction_is_replaced_on_the_same_nonce(stack):
    """Nothing is mined for a while (automine off): the client re-sends the same transfer on the
    same nonce with bumped fees; once a block comes, exactly one of them is mined."""
    base = ChainClient(stack.rpc_url, stack.deployments)
    payer = ChainClient(stack.rpc_url, stack.deployments, anvil_account(6), replace_after_s=0.3,
                        max_fee_per_gas=10**12)
    to = Account.create().address
    nonce0 = base.w3.eth.get_transaction_count(payer.address)
    base.w3.provider.make_request("evm_setAutomine", [False])
    try:
        pending = payer.send("transfer", to, TOKEN, contract="TenzroToken")
        miner = threading.Timer(1.5, lambda: base.w3.provider.make_request("evm_mine", []))
        miner.start()
        res = payer.wait(pending, timeout_s=20)
        miner.join()
    finally:
        base.w3.provider.make_request("evm_setAutomine", [True])
    assert len(pending.hashes) >= 2  # replaced at least once
    assert res.tx_hash == pending.hashes[-1]
    tx = base.w3.eth.get_transaction(res.tx_hash)
    assert tx["nonce"] == nonce0 and tx["maxFeePerGas"] <= 10**12
    assert base.token_balance(to) == TOKEN
    assert base.w3.eth.get_transaction_count(payer.address) == nonce0 + 1
    time.sleep(0.1)
