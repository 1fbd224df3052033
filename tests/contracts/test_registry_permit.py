"""postTaskWithPermit / enrollTrainerWithPermit on a registry over TenzroToken (ERC-2612): the
permit is signed with eth-account over the token's own EIP-712 domain (read through its
``eip712Domain()``, by the operator's `tenzro_operator.permit`), post and enroll are one
transaction each, and no allowance is left; a front-run permit does not block the call; an
expired one is refused by the allowance check.

Amounts are token atto-units; deadlines unix seconds.
"""

from __future__ import annotations

import ape
import pytest
from eth_account import Account
from registry_helpers import (
    INITIAL_FRAGMENTS_ROOT,
    MIN_STAKE,
    OUTER,
    POOL,
    as_tuple,
    deploy_registry,
    params,
)
from tenzro_operator.permit import PermitDomain, sign_permit


@pytest.fixture(scope="module")
def tnzo(project, roles):
    """TenzroToken (ERC20Permit), no initial supply; the owner mints."""
    return roles.owner.deploy(project.TenzroToken, 0)


@pytest.fixture(scope="module")
def preg(project, roles, tnzo):
    return deploy_registry(project, roles.owner, tnzo)


@pytest.fixture(scope="module")
def permits(project, preg):
    """The registry's permit functions (ITrainingRegistryPermit, served by its fallback)."""
    return project.ITrainingRegistryPermit.at(preg.address)


@pytest.fixture(scope="module")
def permit(tnzo, preg, chain):
    """permit(account, value, deadline=None) -> (deadline, v, r, s) for the registry."""

    def _permit(account, value: int, deadline: int | None = None):
        domain = PermitDomain.from_eip712_domain(tnzo.eip712Domain())
        deadline = chain.pending_timestamp + 600 if deadline is None else deadline
        signer = Account.from_key(account.private_key)
        sig = sign_permit(signer, domain, preg.address, value, tnzo.nonces(account), deadline)
        return sig.deadline, sig.v, sig.r, sig.s

    return _permit


def test_domain_is_the_tokens(tnzo, chain):
    domain = PermitDomain.from_eip712_domain(tnzo.eip712Domain())
    assert (domain.name, domain.version, domain.chain_id, domain.verifying_contract) == (
        "Tenzro", "1", chain.chain_id, tnzo.address)


def test_post_and_enroll_with_permits_leave_no_allowance(tnzo, preg, permits, permit, roles):
    p = params("permit-1", trainerCount=2, quorum=2)
    tnzo.mint(roles.sponsor, POOL, sender=roles.owner)
    permits.postTaskWithPermit(as_tuple(p), *permit(roles.sponsor, POOL), sender=roles.sponsor)
    assert tnzo.allowance(roles.sponsor, preg) == 0
    assert tnzo.balanceOf(preg) == POOL
    # nobody enrolls before useRootFlow, with a permit neither (the permit reverts with the call)
    t = roles.trainers[0]
    with ape.reverts(preg.Registry__NotRootFlow, taskId=p["taskId"]):
        permits.enrollTrainerWithPermit(p["taskId"], MIN_STAKE, "did:tenzro:t", *permit(t, MIN_STAKE), sender=t)
    assert tnzo.allowance(t, preg) == 0
    preg.useRootFlow(p["taskId"], INITIAL_FRAGMENTS_ROOT, OUTER, sender=roles.sponsor)
    for t in roles.trainers[:2]:
        tnzo.mint(t, MIN_STAKE, sender=roles.owner)
        permits.enrollTrainerWithPermit(p["taskId"], MIN_STAKE, "did:tenzro:t", *permit(t, MIN_STAKE), sender=t)
        assert tnzo.allowance(t, preg) == 0
        assert tnzo.balanceOf(t) == 0
    run = preg.getRun(p["taskId"])
    assert run.status == 2  # Training: the M-th enrollment opened round 0
    assert run.stakeHeld == 2 * MIN_STAKE


def test_front_run_permit_does_not_block(tnzo, preg, permits, permit, roles):
    p = params("permit-2")
    tnzo.mint(roles.sponsor, POOL, sender=roles.owner)
    sig = permit(roles.sponsor, POOL)
    tnzo.permit(roles.sponsor, preg, POOL, *sig, sender=roles.stranger)  # copied from the mempool
    assert tnzo.allowance(roles.sponsor, preg) == POOL
    permits.postTaskWithPermit(as_tuple(p), *sig, sender=roles.sponsor)
    assert tnzo.allowance(roles.sponsor, preg) == 0
    assert preg.getRun(p["taskId"]).sponsor == roles.sponsor.address


def test_expired_permit_is_refused(project, tnzo, preg, permits, permit, roles, chain):
    p = params("permit-3")
    tnzo.mint(roles.sponsor, POOL, sender=roles.owner)
    nonce = tnzo.nonces(roles.sponsor)
    sig = permit(roles.sponsor, POOL, deadline=chain.pending_timestamp + 5)
    chain.mine(deltatime=60)
    with ape.reverts(project.RegistryEvidence.Registry__AllowanceTooLow, owner=roles.sponsor.address,
                     allowance=0, needed=POOL):
        permits.postTaskWithPermit(as_tuple(p), *sig, sender=roles.sponsor)
    assert tnzo.nonces(roles.sponsor) == nonce
    assert tnzo.allowance(roles.sponsor, preg) == 0


def test_gas_of_one_transaction_against_approve_then_call(tnzo, preg, permits, permit, roles):
    """Gas used (receipts) of the permit path and of approve + the plain call, for a first post and
    enrollment of a fresh account (its permit nonce goes 0 -> 1): contracts/GAS.md, "Permits"."""
    sponsor, other = roles.relayer, roles.stranger  # test accounts with ETH, no permit used yet
    for who in (sponsor, other):
        tnzo.mint(who, POOL + MIN_STAKE, sender=roles.owner)
    p1, p2 = params("gas-permit", trainerCount=2), params("gas-approve", trainerCount=2)
    post_permit = permits.postTaskWithPermit(as_tuple(p1), *permit(sponsor, POOL), sender=sponsor).gas_used
    approve = tnzo.approve(preg, POOL, sender=other).gas_used
    post_plain = preg.postTask(as_tuple(p2), sender=other).gas_used
    preg.useRootFlow(p1["taskId"], INITIAL_FRAGMENTS_ROOT, OUTER, sender=sponsor)
    preg.useRootFlow(p2["taskId"], INITIAL_FRAGMENTS_ROOT, OUTER, sender=other)
    enroll_permit = permits.enrollTrainerWithPermit(p1["taskId"], MIN_STAKE, "did:tenzro:t",
                                                    *permit(other, MIN_STAKE), sender=other).gas_used
    approve2 = tnzo.approve(preg, MIN_STAKE, sender=sponsor).gas_used
    enroll_plain = preg.enrollTrainer(p2["taskId"], MIN_STAKE, "did:tenzro:t", sender=sponsor).gas_used
    print(f"\npostTaskWithPermit {post_permit}; approve {approve} + postTask {post_plain} = {approve + post_plain}"
          f"\nenrollTrainerWithPermit {enroll_permit}; approve {approve2} + enrollTrainer {enroll_plain} = "
          f"{approve2 + enroll_plain}")
    # one transaction instead of two: never dearer than approve + call by more than the permit's
    # own work (signature check, nonce write: < 30k), whatever the shape
    assert post_permit < approve + post_plain + 30_000
    assert enroll_permit < approve2 + enroll_plain + 30_000
    assert tnzo.allowance(sponsor, preg) == tnzo.allowance(other, preg) == 0
