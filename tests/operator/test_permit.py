"""ERC-2612 permits through the operator's ChainClient on a real anvil with the deployed stack
(TenzroToken is an ERC20Permit): `post_task` and `enroll_trainer` are one transaction each and
leave no allowance; the permit is signed over the token's own EIP-712 domain; a token without
permits falls back to approve."""

from __future__ import annotations

import pytest

from op_stack import make_spec
from stack import TOKEN
from tenzro_operator.errors import ChainError, ChainRevert, InsufficientTokens
from tenzro_operator.permit import PermitDomain, permit_typed_data


def _nonce(client) -> int:
    return client.w3.eth.get_transaction_count(client.address)


def test_post_and_enroll_are_one_transaction_each_and_leave_no_allowance(roles):
    sponsor, (t0, t1, _) = roles["sponsor"], roles["trainers"]
    assert sponsor.supports_permit()
    spec = make_spec()
    n = _nonce(sponsor)
    res = sponsor.post_task(spec, "bafyspec")
    assert res.method == "postTaskWithPermit" and _nonce(sponsor) == n + 1
    assert sponsor.allowance() == 0
    tid = spec.task_id_bytes
    for t in (t0, t1):
        n, bal = _nonce(t), t.token_balance()
        res = t.enroll_trainer(tid, 100 * TOKEN, f"did:tenzro:machine:{t.address}")
        assert res.method == "enrollTrainerWithPermit" and _nonce(t) == n + 1
        assert t.allowance() == 0 and bal - t.token_balance() == 100 * TOKEN
        assert res.event("TrainerEnrolled")["trainer"] == t.address
    assert sponsor.get_run(tid).enrolled_count == 2


def test_permit_domain_is_read_from_the_token(roles):
    sponsor = roles["sponsor"]
    d = sponsor.permit_domain()
    assert (d.name, d.version, d.chain_id, d.verifying_contract) == ("Tenzro", "1", sponsor.chain_id,
                                                                   sponsor.token.address)
    sig = sponsor.sign_permit(5 * TOKEN)
    assert sig.owner == sponsor.address and sig.spender == sponsor.registry.address
    assert sig.deadline > sponsor.block_timestamp() and sig.v in (27, 28)
    assert sig.nonce == sponsor.call("nonces", sponsor.address, contract="TenzroToken")


def test_refused_post_sends_nothing_and_leaves_no_allowance(roles):
    sponsor = roles["sponsor"]
    spec = make_spec()
    sponsor.post_task(spec, "bafyspec")
    n = _nonce(sponsor)
    with pytest.raises(ChainRevert) as ei:
        sponsor.post_task(spec, "bafyspec")
    assert ei.value.error_name == "Registry__TaskExists"
    assert _nonce(sponsor) == n and sponsor.allowance() == 0


def test_short_balance_is_refused_before_signing(roles, stack):
    from tenzro_operator.chain import ChainClient
    from tenzro_operator.keys import anvil_account

    poor = ChainClient(stack.rpc_url, stack.deployments, anvil_account(8))
    with pytest.raises(InsufficientTokens):
        poor.spend_permitted(poor.token_balance() + 1, "postTask", ())
    with pytest.raises(ChainError, match="no permit variant"):
        poor.spend_permitted(1, "registerSyncer", 1)


def test_token_without_permit_falls_back_to_approve(roles):
    """A deployment record whose token ABI has no permit (an older TNZO): approve, then postTask."""
    sponsor = roles["sponsor"]
    sponsor._contracts = dict(sponsor._contracts)
    tok = sponsor._contracts["TenzroToken"]
    abi = [i for i in tok.abi if i.get("name") not in ("permit", "nonces", "eip712Domain")]
    sponsor._contracts["TenzroToken"] = sponsor.w3.eth.contract(address=tok.address, abi=abi)
    sponsor._permit_ok = None
    assert not sponsor.supports_permit()
    spec = make_spec()
    n = _nonce(sponsor)
    res = sponsor.post_task(spec, "bafyspec")
    assert res.method == "postTask" and _nonce(sponsor) == n + 2  # approve + postTask
    assert sponsor.allowance() == 0


def test_typed_data_rejects_out_of_range_values():
    d = PermitDomain(0x0F, "Tenzro", "1", 31337, "0x" + "11" * 20)
    with pytest.raises(ValueError, match="value"):
        permit_typed_data(d, "0x" + "22" * 20, "0x" + "33" * 20, -1, 0, 1)
    with pytest.raises(ChainError, match="7"):
        PermitDomain.from_eip712_domain((b"\x0f", "x"))
