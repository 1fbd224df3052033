"""RewardEscrow helpers: pay a beneficiary once a training run's receipt is sealed and verified.

The example dApp of contracts/RewardEscrow.sol (contract notice and contracts/RECEIPT.md):
a payer deposits TNZO for a beneficiary against a run: its task id, the registry that must seal
it (by default here the deployment's), the run's sponsor and spec hash, and the least accepted
work (the registry's ``totalCredits``) it pays for. A task id is taken by whoever posts it first,
so naming the sponsor and the spec hash keeps a junk run posted under the same id from being
paid. Anyone releases the escrow with the run's serialized receipt and run root, which the
contract checks against the verifier at 0x…1008 and against the registry's ``runBinding`` (sealed
run root, sponsor, spec hash, total credits); after the expiry the payer can be refunded instead.

Usage::

    eid = deposit(payer_chain, trainer_address, 50 * 10**18, task_id, expiry_s=3600,
                  sponsor=spec.sponsor_address, spec_hash=spec_hash(spec))
    paid = release(any_chain, eid, task_id)          # after the run is sealed

Amounts are token atto-units (18 decimals); times are unix seconds of the chain (block time).
Contract errors come back as `ChainRevert` with the error's name (``RewardEscrow__TaskMismatch``,
``RewardEscrow__SponsorMismatch``, ``RewardEscrow__SpecMismatch``, ``RewardEscrow__NotEnoughWork``,
...), raised before anything is sent (the client estimates first).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from eth_utils import to_checksum_address

from tenzro_operator.chain import ChainClient
from tenzro_operator.errors import ChainRevert, TenzroError

__all__ = ["ESCROW", "EscrowError", "EscrowStatus", "EscrowView", "can_release", "deposit", "get_escrow", "refund",
           "release", "release_with"]

ESCROW = "RewardEscrow"
ZERO_ADDRESS = "0x0000000000000000000000000000000000000000"


class EscrowError(TenzroError):
    """An escrow operation cannot proceed (e.g. the run has no receipt yet); says why."""


class EscrowStatus(enum.IntEnum):
    """``RewardEscrow.Status``."""

    NONE = 0
    OPEN = 1
    RELEASED = 2
    REFUNDED = 3


@dataclass(frozen=True)
class EscrowView:
    """``getEscrow``: amount in token atto-units (what arrived), expiry in unix seconds."""

    escrow_id: int
    payer: str
    beneficiary: str
    token: str
    registry: str
    expiry: int
    status: EscrowStatus
    task_id: bytes
    amount: int
    sponsor: str  # the run's sponsor the escrow pays for
    spec_hash: bytes  # the run's spec hash the escrow pays for
    min_credits: int  # the least totalCredits of the sealed run


def _b32(value: bytes, what: str = "task id") -> bytes:
    value = bytes(value)
    if len(value) != 32:
        raise EscrowError(f"{what} must be 32 bytes, got {len(value)}")
    return value


def deposit(chain: ChainClient, beneficiary: str, amount_atto: int, task_id: bytes, expiry_s: int, *,
            sponsor: str, spec_hash: bytes, min_credits: int = 0, registry: str | None = None) -> int:
    """Escrow ``amount_atto`` of the deployment's TenzroToken from ``chain``'s account for
    ``beneficiary``, payable once the run (``RunTerms``) is sealed.

    Approves the RewardEscrow for the amount first (when the allowance is short).

    Args:
        chain: a `ChainClient` with an account (the payer), holding the tokens.
        beneficiary: who is paid on release (an address).
        amount_atto: token atto-units (> 0).
        task_id: bytes32 task id of the run the payment waits for.
        expiry_s: seconds from the next block's time (`ChainClient.next_block_time`) until the
            escrow can no longer be released (and can be refunded).
        sponsor: the run's sponsor (the spec's ``sponsor_address``, who posts it).
        spec_hash: the run's spec hash (`tenzro_operator.spec.spec_hash`, 32 bytes, not zero).
        min_credits: the least ``totalCredits`` (fragment-size-weighted accepted submissions) of
            the sealed run; 0 = any amount of work.
        registry: the TrainingRegistry that must seal the run (default: the deployment's).
    Returns:
        the escrow id (from the ``Deposited`` event).
    Raises:
        EscrowError: a bad amount, expiry, task id, spec hash or minimum of credits (nothing sent).
        ChainRevert: e.g. ``RewardEscrow__ExpiryNotInFuture``, ``RewardEscrow__ZeroAddress`` (zero
            sponsor), ``RewardEscrow__RegistryRequired``.
    """
    if amount_atto <= 0:
        raise EscrowError(f"deposit amount must be > 0 atto-units, got {amount_atto}")
    if expiry_s <= 0:
        raise EscrowError(f"expiry_s must be > 0 seconds, got {expiry_s}")
    if min_credits < 0:
        raise EscrowError(f"min_credits must be >= 0, got {min_credits}")
    terms = (_b32(task_id), to_checksum_address(registry) if registry is not None else chain.registry.address,
             to_checksum_address(sponsor), _b32(spec_hash, "spec hash"), int(min_credits))
    if terms[3] == bytes(32):
        raise EscrowError("spec hash must not be zero: the escrow would not be bound to a run")
    escrow_addr = chain.contract(ESCROW).address
    chain.ensure_allowance(amount_atto, spender=escrow_addr)
    expiry = chain.next_block_time() + int(expiry_s)  # not the head: an idle chain's head is old
    res = chain.transact("deposit", chain.token.address, to_checksum_address(beneficiary), int(amount_atto), terms,
                         expiry, contract=ESCROW)
    return int(res.event("Deposited")["escrowId"])


def release_with(chain: ChainClient, escrow_id: int, serialized: bytes, run_root: bytes) -> int:
    """``release(escrowId, receipt, runRoot)`` with given receipt bytes; returns the amount paid
    (atto-units, from the ``Released`` event).

    Raises:
        ChainRevert: the contract refuses (``RewardEscrow__TaskMismatch``, ``__ReceiptRejected``,
            ``__RunRootMismatch``, ``__SponsorMismatch``, ``__SpecMismatch``, ``__NotEnoughWork``,
            ``__Expired``, ``__NotOpen`` ...); nothing is sent then.
    """
    res = chain.transact("release", int(escrow_id), bytes(serialized), bytes(run_root), contract=ESCROW)
    return int(res.event("Released")["amount"])


def release(chain: ChainClient, escrow_id: int, task_id: bytes) -> int:
    """Release escrow ``escrow_id`` with the sealed receipt of ``task_id`` read from the registry
    (``getReceipt``: serialized bytes and run root). Anyone may call; the beneficiary is paid.

    Returns:
        the amount paid, token atto-units.
    Raises:
        EscrowError: ``task_id`` has no sealed receipt yet.
        ChainRevert: the escrow refuses this receipt (e.g. ``RewardEscrow__TaskMismatch`` when the
            escrow waits for another task).
    """
    try:
        rec = chain.get_receipt(_b32(task_id))
    except ChainRevert as exc:
        raise EscrowError(f"task 0x{bytes(task_id).hex()} has no sealed receipt ({exc.error_name}); "
                          "seal the run before releasing") from None
    return release_with(chain, escrow_id, rec.serialized, rec.run_root)


def can_release(chain: ChainClient, escrow_id: int, serialized: bytes, run_root: bytes) -> bool:
    """What ``release`` would do with these receipt bytes and root, without sending anything."""
    return bool(chain.call("canRelease", int(escrow_id), bytes(serialized), bytes(run_root), contract=ESCROW))


def refund(chain: ChainClient, escrow_id: int) -> int:
    """Pay an expired escrow back to its payer (anyone may call, at or after the expiry).

    Returns:
        the amount refunded, token atto-units.
    Raises:
        ChainRevert: ``RewardEscrow__NotExpired`` before the expiry, ``__NotOpen`` if already paid.
    """
    res = chain.transact("refund", int(escrow_id), contract=ESCROW)
    return int(res.event("Refunded")["amount"])


def get_escrow(chain: ChainClient, escrow_id: int) -> EscrowView:
    """``getEscrow``; an unknown id comes back with status NONE and zero fields."""
    e = chain.call_named("getEscrow", int(escrow_id), contract=ESCROW)
    d = next(iter(e.values()))
    return EscrowView(escrow_id=int(escrow_id), payer=to_checksum_address(d["payer"]),
                      beneficiary=to_checksum_address(d["beneficiary"]), token=to_checksum_address(d["token"]),
                      registry=to_checksum_address(d["registry"]), expiry=int(d["expiry"]),
                      status=EscrowStatus(int(d["status"])), task_id=bytes(d["taskId"]), amount=int(d["amount"]),
                      sponsor=to_checksum_address(d["sponsor"]), spec_hash=bytes(d["specHash"]),
                      min_credits=int(d["minCredits"]))
