"""RewardEscrow payouts against sealed root-flow runs (`tenzro_operator.escrow`), on the devnet.

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
from tenzro_operator.spec import spec_hash

pytestmark = pytest.mark.slow
PAYER, BENEFICIARY = drv.SPONSOR, 5


def terms(run: drv.SealedRun, **kw) -> dict:
    """The run terms of a sealed run: its sponsor and spec hash (``kw`` overrides them)."""
    return {"sponsor": run.spec.sponsor_address, "spec_hash": spec_hash(run.spec), **kw}


def test_release_pays_the_beneficiary_with_a_valid_receipt(stack, honest_run):
    payer, anyone = stack.chain(PAYER), stack.chain(drv.SYNCER)
    ben = anvil_account(BENEFICIARY).address
    amount = 7 * drv.TOKEN + 3
    p0, b0 = payer.token_balance(payer.address), payer.token_balance(ben)
    # all of the run's work: 2 rounds x 2 trainers x every parameter (each fragment weighs its size),
    # the credits the registry summed from the committed bitmaps
    work = 2 * 2 * honest_run.spec.architecture.param_count
    assert work == sum(honest_run.credits) == payer.get_run(honest_run.task_id).total_credits
    eid = escrow.deposit(payer, ben, amount, honest_run.task_id, expiry_s=3600, **terms(honest_run, min_credits=work))
    e = escrow.get_escrow(payer, eid)
    assert (e.status, e.amount, e.beneficiary, e.task_id) == (EscrowStatus.OPEN, amount, ben, honest_run.task_id)
    assert (e.sponsor, e.spec_hash, e.min_credits) == (payer.address, spec_hash(honest_run.spec), work)
    assert e.registry == payer.registry.address  # anchored to the registry that must seal the run
    assert payer.token_balance(payer.address) == p0 - amount

    rec = payer.get_receipt(honest_run.task_id)
    assert escrow.can_release(payer, eid, rec.serialized, rec.run_root)
    assert escrow.release(anyone, eid, honest_run.task_id) == amount  # anyone may release
    assert payer.token_balance(ben) == b0 + amount
    assert escrow.get_escrow(payer, eid).status == EscrowStatus.RELEASED
    with pytest.raises(ChainRevert, match="RewardEscrow__NotOpen"):
        escrow.release(anyone, eid, honest_run.task_id)


def test_release_refuses_a_receipt_of_another_task(stack, honest_run, perturbed_run):
    payer = stack.chain(PAYER)
    ben = anvil_account(BENEFICIARY).address
    eid = escrow.deposit(payer, ben, 2 * drv.TOKEN, honest_run.task_id, expiry_s=3600, **terms(honest_run))
    b0 = payer.token_balance(ben)
    other = payer.get_receipt(perturbed_run.task_id)
    assert not escrow.can_release(payer, eid, other.serialized, other.run_root)
    with pytest.raises(ChainRevert, match="RewardEscrow__TaskMismatch") as exc:
        escrow.release(payer, eid, perturbed_run.task_id)
    assert exc.value.args_["receiptTaskId"] == perturbed_run.task_id
    # A receipt of the right task with a root it was not sealed with is refused by the verifier.
    own = payer.get_receipt(honest_run.task_id)
    with pytest.raises(ChainRevert, match="RewardEscrow__ReceiptRejected"):
        escrow.release_with(payer, eid, own.serialized, other.run_root)
    assert payer.token_balance(ben) == b0 and escrow.get_escrow(payer, eid).status == EscrowStatus.OPEN


def test_release_before_seal_is_a_clear_error(stack):
    payer = stack.chain(PAYER)
    task = keccak(text="replay-never-sealed")
    eid = escrow.deposit(payer, anvil_account(BENEFICIARY).address, drv.TOKEN, task, expiry_s=3600,
                         sponsor=payer.address, spec_hash=b"\x01" * 32)
    with pytest.raises(EscrowError, match="no sealed receipt"):
        escrow.release(payer, eid, task)


def test_refund_only_after_expiry(stack, honest_run):
    payer = stack.chain(PAYER)
    amount = 3 * drv.TOKEN
    eid = escrow.deposit(payer, anvil_account(BENEFICIARY).address, amount, honest_run.task_id, expiry_s=120,
                         **terms(honest_run))
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
    ben = anvil_account(BENEFICIARY).address
    with pytest.raises(EscrowError, match="> 0"):
        escrow.deposit(payer, ben, 0, honest_run.task_id, expiry_s=60, **terms(honest_run))
    with pytest.raises(EscrowError, match="task id must be 32 bytes"):
        escrow.deposit(payer, ben, 1, b"short", expiry_s=60, **terms(honest_run))
    with pytest.raises(EscrowError, match="spec hash must not be zero"):
        escrow.deposit(payer, ben, 1, honest_run.task_id, expiry_s=60, **terms(honest_run, spec_hash=bytes(32)))
    with pytest.raises(ChainRevert, match="RewardEscrow__ZeroAddress"):
        escrow.deposit(payer, ben, 1, honest_run.task_id, expiry_s=60,
                       **terms(honest_run, sponsor="0x" + "00" * 20))


@pytest.mark.parametrize("wrong,error", [
    ({"sponsor": anvil_account(BENEFICIARY).address}, "RewardEscrow__SponsorMismatch"),
    ({"spec_hash": b"\x42" * 32}, "RewardEscrow__SpecMismatch"),
    ({"min_credits": 10**12}, "RewardEscrow__NotEnoughWork"),
])
def test_release_refuses_a_run_that_is_not_the_one_paid_for(stack, honest_run, wrong, error):
    """A sealed run of the right task id, receipt and root, but another sponsor, another spec, or
    less accepted work than the escrow names (attack 7: a junk run under a taken task id)."""
    payer = stack.chain(PAYER)
    ben = anvil_account(BENEFICIARY).address
    eid = escrow.deposit(payer, ben, drv.TOKEN, honest_run.task_id, expiry_s=3600, **terms(honest_run, **wrong))
    rec = payer.get_receipt(honest_run.task_id)
    b0 = payer.token_balance(ben)
    assert not escrow.can_release(payer, eid, rec.serialized, rec.run_root)
    with pytest.raises(ChainRevert, match=error):
        escrow.release(payer, eid, honest_run.task_id)
    assert payer.token_balance(ben) == b0 and escrow.get_escrow(payer, eid).status == EscrowStatus.OPEN
    # the registry's binding is what the escrow compares with
    root, sponsor, shash, credits = payer.run_binding(honest_run.task_id)
    assert (root, sponsor, shash) == (rec.run_root, honest_run.spec.sponsor_address, spec_hash(honest_run.spec))
    assert credits == payer.get_run(honest_run.task_id).total_credits > 0
