"""RewardEscrow payouts against sealed runs (`tenzro_operator.escrow`), on the devnet.

Balances are read from the token contract, not from the helper's return values, so a helper
that reported a payout without making it would fail."""

from __future__ import annotations

import pytest
from eth_utils import keccak

import run_driver as drv
from tenzro_operator import escrow
from tenzro_operator.errors import ChainRevert
from tenzro_operator.escrow import EscrowError, EscrowStatus
from tenzro_operator.keys import anvil_account

pytestmark = pytest.mark.slow
PAYER, BENEFICIARY = drv.SPONSOR, 5


def test_release_pays_the_beneficiary_with_a_valid_receipt(stack, honest_run):
    payer, anyone = stack.chain(PAYER), stack.chain(drv.SYNCER)
    ben = anvil_account(BENEFICIARY).address
    amount = 7 * drv.TOKEN + 3
    p0, b0 = payer.token_balance(payer.address), payer.token_balance(ben)
    eid = escrow.deposit(payer, ben, amount, honest_run.task_id, expiry_s=3600)
    e = escrow.get_escrow(payer, eid)
    assert (e.status, e.amount, e.beneficiary, e.task_id) == (EscrowStatus.OPEN, amount, ben, honest_run.task_id)
    assert e.registry == payer.registry.address  # anchored to the registry that must seal the run
    assert payer.token_balance(payer.address) == p0 - amount

    rec = payer.get_receipt(honest_run.task_id)
    assert escrow.can_release(payer, eid, rec.serialized, rec.run_root)
    assert escrow.release(anyone, eid, honest_run.task_id) == amount  # anyone may release
    assert payer.token_balance(ben) == b0 + amount
    assert escrow.get_escrow(payer, eid).status == EscrowStatus.RELEASED
    with pytest.raises(ChainRevert, match="RewardEscrow__NotOpen"):
        escrow.release(anyone, eid, honest_run.task_id)


def test_release_refuses_a_receipt_of_another_task(stack, honest_run, bad_hash_run):
    payer = stack.chain(PAYER)
    ben = anvil_account(BENEFICIARY).address
    eid = escrow.deposit(payer, ben, 2 * drv.TOKEN, honest_run.task_id, expiry_s=3600)
    b0 = payer.token_balance(ben)
    other = payer.get_receipt(bad_hash_run.task_id)
    assert not escrow.can_release(payer, eid, other.serialized, other.run_root)
    with pytest.raises(ChainRevert, match="RewardEscrow__TaskMismatch") as exc:
        escrow.release(payer, eid, bad_hash_run.task_id)
    assert exc.value.args_["receiptTaskId"] == bad_hash_run.task_id
    # A receipt of the right task with a root it was not sealed with is refused by the verifier.
    own = payer.get_receipt(honest_run.task_id)
    with pytest.raises(ChainRevert, match="RewardEscrow__ReceiptRejected"):
        escrow.release_with(payer, eid, own.serialized, other.run_root)
    assert payer.token_balance(ben) == b0 and escrow.get_escrow(payer, eid).status == EscrowStatus.OPEN


def test_release_before_seal_is_a_clear_error(stack):
    payer = stack.chain(PAYER)
    task = keccak(text="replay-never-sealed")
    eid = escrow.deposit(payer, anvil_account(BENEFICIARY).address, drv.TOKEN, task, expiry_s=3600)
    with pytest.raises(EscrowError, match="no sealed receipt"):
        escrow.release(payer, eid, task)


def test_refund_only_after_expiry(stack, honest_run):
    payer = stack.chain(PAYER)
    amount = 3 * drv.TOKEN
    eid = escrow.deposit(payer, anvil_account(BENEFICIARY).address, amount, honest_run.task_id, expiry_s=120)
    with pytest.raises(ChainRevert, match="RewardEscrow__NotExpired"):
        escrow.refund(payer, eid)
    p0 = payer.token_balance(payer.address)
    payer.mine(seconds=121)
    with pytest.raises(ChainRevert, match="RewardEscrow__Expired"):
        escrow.release(payer, eid, honest_run.task_id)
    assert escrow.refund(stack.chain(drv.SYNCER), eid) == amount  # anyone may trigger it; the payer is paid
    assert payer.token_balance(payer.address) == p0 + amount
    assert escrow.get_escrow(payer, eid).status == EscrowStatus.REFUNDED


def test_deposit_rejects_bad_input(stack, honest_run):
    payer = stack.chain(PAYER)
    with pytest.raises(EscrowError, match="> 0"):
        escrow.deposit(payer, anvil_account(BENEFICIARY).address, 0, honest_run.task_id, expiry_s=60)
    with pytest.raises(EscrowError, match="32 bytes"):
        escrow.deposit(payer, anvil_account(BENEFICIARY).address, 1, b"short", expiry_s=60)
