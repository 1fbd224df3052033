"""A small JSON notice a party signs with its Ethereum key and publishes on a run's pubsub topic.

The syncer's endpoint (`tenzro_operator.roles.delivery.Announcement`) and a party's IPFS node
(`tenzro_operator.peer_book.NodeAnnouncement`) are such notices. The signature is EIP-191
``personal_sign`` over `SignedNotice.body`, the canonical JSON (sorted keys, no spaces) of every
field but ``signature``; a reader trusts a notice only when `SignedNotice.signer` recovers to the
address the run says may speak (the run's syncer, an enrolled trainer), so nobody else can point
a party at an endpoint or a node of their choosing.
"""

from __future__ import annotations

import json
from typing import ClassVar

from eth_account.messages import defunct_hash_message, encode_defunct
from pydantic import BaseModel, ConfigDict, ValidationError

from tenzro_operator.root_flow import MAX_MESSAGE_BYTES, RootFlowError, recover_signer

__all__ = ["SignedNotice"]


class SignedNotice(BaseModel):
    """Base of the signed notices: subclasses declare the fields, ``signature`` (0x + 65 bytes
    hex) last, and ``what`` (named in `parse`'s errors)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    what: ClassVar[str] = "notice"

    def body(self) -> bytes:
        """What the signer signs: the canonical JSON of every field but the signature."""
        return json.dumps(self.model_dump(mode="json", exclude={"signature"}), sort_keys=True,
                          separators=(",", ":")).encode()

    def encode(self) -> bytes:
        """The message published: the canonical JSON of every field."""
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def sign_fields(cls, account, **fields) -> "SignedNotice":
        """The notice of ``fields`` signed by ``account`` (an eth-account `LocalAccount`)."""
        unsigned = cls.model_construct(**fields, signature="0x" + "00" * 65)
        sig = account.sign_message(encode_defunct(primitive=unsigned.body())).signature
        return cls(**fields, signature="0x" + bytes(sig).hex())

    @classmethod
    def parse(cls, data: bytes):
        """Raises RootFlowError: more than MAX_MESSAGE_BYTES bytes, not JSON, or a bad field."""
        if len(data) > MAX_MESSAGE_BYTES:
            raise RootFlowError(f"{cls.what} of {len(data)} bytes exceeds {MAX_MESSAGE_BYTES}")
        try:
            return cls.model_validate_json(data)
        except ValidationError as exc:
            raise RootFlowError(f"not {cls.what}: {exc.errors()[0]['msg']}") from None

    def digest(self) -> bytes:
        """The 32-byte EIP-191 digest its signature signs."""
        return bytes(defunct_hash_message(primitive=self.body()))

    def signer(self) -> str:
        """The address that signed it (lower-case), or "" when the signature recovers to none."""
        return recover_signer(self.digest(), bytes.fromhex(self.signature[2:]))
