"""EIP-712 signing of the registry's typed data (domain "TenzroTrainingRegistry", version "2"):
an outer gradient and a submission commitment, signed locally with eth-account, and their digests
to check against the registry's own."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from eth_account.messages import encode_typed_data
from eth_account.signers.local import LocalAccount
from eth_utils import keccak, to_checksum_address

from tenzro_operator.chain.records import SignedPayload, b32

EIP712_DOMAIN_NAME = "TenzroTrainingRegistry"
EIP712_DOMAIN_VERSION = "2"


# ----------------------------------------------------------------------------- EIP-712


def outer_gradient_typed_data(chain_id: int, registry: str, task_id: bytes, round: int, fragment: int,
                              base_root: bytes, payload: SignedPayload) -> dict[str, Any]:
    """EIP-712 message a trainer signs for ``submitOuterGradient`` (PROTOCOL.md §4):
    ``OuterGradient(bytes32 taskId,uint32 round,uint16 fragment,bytes32 baseRoot,bytes32 payloadRoot,
    uint32 payloadSumsq,string cid,bytes32 payloadHash)``, domain ``{name: "TenzroTrainingRegistry",
    version: "2", chainId, verifyingContract}``; ``base_root`` is the run's weightsRoot while the round
    is open (the weights the trainer started from)."""
    return {
        "types": {
            "EIP712Domain": [{"name": "name", "type": "string"}, {"name": "version", "type": "string"},
                             {"name": "chainId", "type": "uint256"},
                             {"name": "verifyingContract", "type": "address"}],
            "OuterGradient": [{"name": "taskId", "type": "bytes32"}, {"name": "round", "type": "uint32"},
                              {"name": "fragment", "type": "uint16"}, {"name": "baseRoot", "type": "bytes32"},
                              {"name": "payloadRoot", "type": "bytes32"},
                              {"name": "payloadSumsq", "type": "uint32"}, {"name": "cid", "type": "string"},
                              {"name": "payloadHash", "type": "bytes32"}],
        },
        "primaryType": "OuterGradient",
        "domain": {"name": EIP712_DOMAIN_NAME, "version": EIP712_DOMAIN_VERSION, "chainId": chain_id,
                   "verifyingContract": to_checksum_address(registry)},
        "message": {"taskId": b32(task_id), "round": int(round), "fragment": int(fragment),
                    "baseRoot": b32(base_root), "payloadRoot": b32(payload.payload_root),
                    "payloadSumsq": int(payload.payload_sumsq), "cid": payload.cid,
                    "payloadHash": b32(payload.payload_hash)},
    }


def sign_outer_gradient(account: LocalAccount, chain_id: int, registry: str, task_id: bytes, round: int,
                        fragment: int, base_root: bytes, payload: SignedPayload) -> SignedPayload:
    """``payload`` with the trainer's 65-byte (r, s, v) signature over `outer_gradient_typed_data`."""
    msg = encode_typed_data(full_message=outer_gradient_typed_data(chain_id, registry, task_id, round, fragment,
                                                                     base_root, payload))
    return dataclasses.replace(payload, signature=bytes(account.sign_message(msg).signature))


def outer_gradient_digest(chain_id: int, registry: str, task_id: bytes, round: int, fragment: int,
                          base_root: bytes, payload: SignedPayload) -> bytes:
    """The 32-byte EIP-712 digest (``keccak(0x1901 || domainSeparator || structHash)``)."""
    m = encode_typed_data(full_message=outer_gradient_typed_data(chain_id, registry, task_id, round, fragment,
                                                                   base_root, payload))
    return keccak(b"\x19" + m.version + m.header + m.body)


SUBMISSION_COMMITMENT_TYPE = "SubmissionCommitment(bytes32 taskId,uint32 round,uint16 fragment,bytes32 commitment)"
_SUBMISSION_COMMITMENT_TYPEHASH = keccak(SUBMISSION_COMMITMENT_TYPE.encode())
_DOMAIN_TYPEHASH = keccak(b"EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)")


@functools.lru_cache(maxsize=16)
def registry_domain_separator(chain_id: int, registry: str) -> bytes:
    """The registry's EIP-712 domain separator (the ``OuterGradient`` one: name, version, chain id, address)."""
    return keccak(_DOMAIN_TYPEHASH + keccak(EIP712_DOMAIN_NAME.encode()) + keccak(EIP712_DOMAIN_VERSION.encode())
                  + int(chain_id).to_bytes(32, "big") + bytes(12) + bytes.fromhex(registry[2:]))


def submission_commitment_digest(chain_id: int, registry: str, task_id: bytes, round: int, fragment: int,
                                 commitment: bytes) -> bytes:
    """The 32-byte EIP-712 digest a trainer signs for an off-chain commitment (PROTOCOL.md §5):
    ``SubmissionCommitment(bytes32 taskId,uint32 round,uint16 fragment,bytes32 commitment)`` under
    the registry's domain (`outer_gradient_typed_data`'s). Off-chain only: the registry never reads
    it; the syncer keeps a commitment only when it recovers to the trainer it names. Computed with
    keccak directly (no typed-data encoder): the syncer computes one per commitment it receives.

    Raises:
        ValueError: a field out of its type's range (task id or commitment not 32 bytes).
    """
    if len(task_id) != 32 or len(commitment) != 32 or not 0 <= round < 2**32 or not 0 <= fragment < 2**16:
        raise ValueError("task id and commitment must be 32 bytes, round a uint32, fragment a uint16")
    struct = keccak(_SUBMISSION_COMMITMENT_TYPEHASH + bytes(task_id) + int(round).to_bytes(32, "big")
                    + int(fragment).to_bytes(32, "big") + bytes(commitment))
    return keccak(b"\x19\x01" + registry_domain_separator(int(chain_id), registry.lower()) + struct)


def sign_submission_commitment(account: LocalAccount, chain_id: int, registry: str, task_id: bytes, round: int,
                               fragment: int, commitment: bytes) -> bytes:
    """The trainer's 65-byte (r, s, v) signature over `submission_commitment_digest`."""
    digest = submission_commitment_digest(chain_id, registry, task_id, round, fragment, commitment)
    return bytes(account.unsafe_sign_hash(digest).signature)
