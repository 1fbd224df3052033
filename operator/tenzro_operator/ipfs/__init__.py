"""IPFS: the operator's own node and what it says to it.

Owns the Kubo RPC client, which checks every CID it hands out or accepts against the bytes
(`client`), the embedded node's launcher (`node`), the bootstrap peers a daemon keeps connected
(`peers`) and pubsub: topics, multibase and the message stream (`pubsub`). It must not import the
chain, the roles, the daemons or the CLI: they import it.
"""

from __future__ import annotations

from tenzro_operator.ipfs.client import (
    CHUNK_SIZE,
    DEFAULT_MAX_BYTES,
    MAX_LINKS,
    Cid,
    IpfsBadCid,
    IpfsClient,
    IpfsContentError,
    IpfsError,
    IpfsIntegrityError,
    IpfsNotFound,
    IpfsTooLarge,
    IpfsUnavailable,
    IpfsUnsupported,
    check_fetchable,
    kubo_cid,
    parse_cid,
    verify_content,
)

__all__ = [
    "CHUNK_SIZE", "DEFAULT_MAX_BYTES", "MAX_LINKS", "Cid", "IpfsBadCid", "IpfsClient", "IpfsContentError", "IpfsError",
    "IpfsIntegrityError", "IpfsNotFound", "IpfsTooLarge", "IpfsUnavailable", "IpfsUnsupported", "check_fetchable",
    "kubo_cid", "parse_cid", "verify_content",
]
