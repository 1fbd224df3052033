"""ERC-2612 permits: the EIP-712 typed data a token's ``permit`` checks, and the signature.

A permit lets one transaction both authorize and spend: the registry's
``postTaskWithPermit`` / ``enrollTrainerWithPermit`` call ``token.permit(owner, registry,
value, deadline, v, r, s)`` and then pull exactly ``value``, so no allowance is left behind.
The domain is the token's own, read from its ERC-5267 ``eip712Domain()`` (name, version,
chain id, verifying contract), never assumed. Sources: EIP-2612, EIP-712, ERC-5267.

    domain = PermitDomain.from_eip712_domain(token.functions.eip712Domain().call())
    sig = sign_permit(account, domain, spender=registry, value=10**18, nonce=0, deadline=t + 600)
    registry.functions.enrollTrainerWithPermit(task, 10**18, did, sig.deadline, sig.v, sig.r, sig.s)

Amounts are token atto-units; ``deadline`` is a unix time in seconds (inclusive, as OpenZeppelin
checks ``block.timestamp <= deadline``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from eth_account.messages import encode_typed_data
from eth_account.signers.local import LocalAccount
from eth_utils import to_checksum_address

from tenzro_operator.errors import ChainError

__all__ = ["PermitDomain", "PermitSignature", "permit_typed_data", "sign_permit"]

#: ERC-5267 ``fields`` bits: name, version, chainId, verifyingContract, salt.
_NAME, _VERSION, _CHAIN_ID, _CONTRACT, _SALT = 0x01, 0x02, 0x04, 0x08, 0x10
_DOMAIN_FIELDS = (("name", "string", _NAME), ("version", "string", _VERSION), ("chainId", "uint256", _CHAIN_ID),
                  ("verifyingContract", "address", _CONTRACT), ("salt", "bytes32", _SALT))
_PERMIT_TYPE = [
    {"name": "owner", "type": "address"},
    {"name": "spender", "type": "address"},
    {"name": "value", "type": "uint256"},
    {"name": "nonce", "type": "uint256"},
    {"name": "deadline", "type": "uint256"},
]
_UINT256_MAX = 2**256 - 1


@dataclass(frozen=True)
class PermitDomain:
    """The EIP-712 domain of a token (only the fields its ``eip712Domain()`` marks as used)."""

    fields: int
    name: str
    version: str
    chain_id: int
    verifying_contract: str
    salt: bytes = b"\x00" * 32

    @classmethod
    def from_eip712_domain(cls, answer: Sequence[Any]) -> "PermitDomain":
        """From the 7-tuple ``eip712Domain()`` returns: (fields bytes1, name, version, chainId,
        verifyingContract, salt, extensions).

        Raises:
            ChainError: a malformed answer, or extensions (which EIP-712 v4 cannot express).
        """
        if len(answer) != 7:
            raise ChainError(f"eip712Domain() returned {len(answer)} values, expected 7")
        fields, name, version, chain_id, contract, salt, extensions = answer
        fields = int.from_bytes(bytes(fields), "big") if isinstance(fields, (bytes, bytearray)) else int(fields)
        if extensions:
            raise ChainError(f"the token's EIP-712 domain has extensions {list(extensions)}: not supported")
        return cls(fields, str(name), str(version), int(chain_id), to_checksum_address(contract), bytes(salt))

    def as_typed(self) -> tuple[list[dict[str, str]], dict[str, Any]]:
        """(``EIP712Domain`` type list, domain values) restricted to the used fields."""
        values = {"name": self.name, "version": self.version, "chainId": self.chain_id,
                  "verifyingContract": self.verifying_contract, "salt": self.salt}
        used = [(n, t) for n, t, bit in _DOMAIN_FIELDS if self.fields & bit]
        return [{"name": n, "type": t} for n, t in used], {n: values[n] for n, _ in used}


@dataclass(frozen=True)
class PermitSignature:
    """A signed permit: ``v`` (27/28), ``r`` and ``s`` (32 bytes each), for ``value`` atto-units
    until ``deadline`` (unix seconds)."""

    owner: str
    spender: str
    value: int
    nonce: int
    deadline: int
    v: int
    r: bytes
    s: bytes


def permit_typed_data(domain: PermitDomain, owner: str, spender: str, value: int, nonce: int,
                      deadline: int) -> dict[str, Any]:
    """The EIP-712 ``full_message`` of ``Permit(owner, spender, value, nonce, deadline)``.

    Raises:
        ValueError: ``value``, ``nonce`` or ``deadline`` outside uint256.
    """
    for label, x in (("value", value), ("nonce", nonce), ("deadline", deadline)):
        if not 0 <= int(x) <= _UINT256_MAX:
            raise ValueError(f"permit {label} {x} is not a uint256")
    domain_type, domain_values = domain.as_typed()
    return {
        "types": {"EIP712Domain": domain_type, "Permit": _PERMIT_TYPE},
        "primaryType": "Permit",
        "domain": domain_values,
        "message": {"owner": to_checksum_address(owner), "spender": to_checksum_address(spender),
                    "value": int(value), "nonce": int(nonce), "deadline": int(deadline)},
    }


def sign_permit(account: LocalAccount, domain: PermitDomain, spender: str, value: int, nonce: int,
                deadline: int) -> PermitSignature:
    """``account``'s permit for ``spender`` to pull ``value`` atto-units, valid until ``deadline``
    (unix seconds) and only at the token's current ``nonces(owner)`` = ``nonce``."""
    typed = permit_typed_data(domain, account.address, spender, value, nonce, deadline)
    signed = account.sign_message(encode_typed_data(full_message=typed))
    return PermitSignature(owner=account.address, spender=to_checksum_address(spender), value=int(value),
                           nonce=int(nonce), deadline=int(deadline), v=int(signed.v),
                           r=int(signed.r).to_bytes(32, "big"), s=int(signed.s).to_bytes(32, "big"))
