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
from tenzro_operator.root_flow import outer_rule


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
    sponsor.use_root_flow(tid, b"\x01" * 32, outer_rule(spec))  # before anyone may enroll
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


def _idle(client, seconds: int) -> None:
    """The chain as after ``seconds`` with no block: the head keeps its timestamp, the next block
    is stamped that much later (anvil's clock moves; no transaction mined it)."""
    client.w3.provider.make_request("evm_increaseTime", [seconds])


def test_permit_deadline_counts_from_the_next_block_not_an_old_head(fresh_stack):
    """A chain idle for longer than the permit's life (a devnet between tests, a quiet L2): a
    deadline counted from the head block's timestamp has passed when the transaction is mined,
    the permit is skipped and the post reverts. Counted from the pending block it goes through."""
    from tenzro_operator.chain import ChainClient
    from tenzro_operator.keys import anvil_account

    sponsor = ChainClient(fresh_stack.rpc_url, fresh_stack.deployments, anvil_account(1))
    _idle(sponsor, sponsor.PERMIT_TTL_S + 120)
    res = sponsor.post_task(make_spec(), "bafyspec")
    assert res.method == "postTaskWithPermit" and sponsor.allowance() == 0
    assert sponsor.block_timestamp(res.block_number) <= sponsor.sign_permit(1).deadline - sponsor.PERMIT_TTL_S + 1


def test_a_mined_revert_is_named_even_when_replaying_it_on_the_parent_block_succeeds(fresh_stack):
    """A transaction that reverts only because of its own block (here: a permit that expired
    between signing and mining) succeeds when replayed on the parent block; the client asks the
    node for the transaction's own trace and names the registry's error, not "could not be
    recovered"."""
    from tenzro_operator.chain import ChainClient
    from tenzro_operator.errors import TxReverted
    from tenzro_operator.keys import anvil_account

    sponsor = ChainClient(fresh_stack.rpc_url, fresh_stack.deployments, anvil_account(1))
    spec = make_spec()
    params = sponsor.task_params(spec, "bafyspec")
    struct = sponsor._struct("postTask", 0, params)
    sig = sponsor.sign_permit(params["rewardPool"], deadline=sponsor.block_timestamp() + 5)
    _idle(sponsor, 60)
    pending = sponsor.send("postTaskWithPermit", struct, sig.deadline, sig.v, sig.r, sig.s, gas=2_000_000)
    with pytest.raises(TxReverted) as ei:
        sponsor.wait(pending)
    assert ei.value.error_name == "Registry__AllowanceTooLow"
    assert sponsor.allowance() == 0
