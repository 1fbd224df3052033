"""An independent computation of Kubo's CIDv1 for a file (test oracle; shares no code with the client).

Kubo `ipfs add --cid-version 1`: the file is cut in 262144-byte chunks; each
chunk is a raw block (CIDv1, codec 0x55, sha2-256). With more than one chunk
the chunks hang under dag-pb nodes (codec 0x70) of at most 174 links, level
by level, until one root remains. A dag-pb node is the protobuf PBNode
(fields written in the order Links=2 then Data=1); a link is PBLink
{Hash=1: CID bytes, Name=2: "", Tsize=3: cumulative size}; Data is the
UnixFS message {Type=1: 2 (File), filesize=3, blocksizes=4 (one per child)}.
Specs: https://ipld.io/specs/codecs/dag-pb/spec/ and
https://github.com/ipfs/specs/blob/main/UNIXFS.md.
"""

from __future__ import annotations

import base64
import hashlib


def uvarint(n: int) -> bytes:
    out = []
    while n >= 0x80:
        out.append((n % 128) + 128)
        n //= 128
    out.append(n)
    return bytes(out)


def field(number: int, value: int | bytes) -> bytes:
    """One protobuf field: varint (wire type 0) for int, length-delimited (2) for bytes."""
    if isinstance(value, int):
        return uvarint(number * 8) + uvarint(value)
    return uvarint(number * 8 + 2) + uvarint(len(value)) + value


def cid_v1(codec: int, block: bytes) -> bytes:
    """Binary CIDv1: version 1, codec, multihash sha2-256 (0x12, 32 bytes)."""
    return bytes([0x01]) + uvarint(codec) + bytes([0x12, 0x20]) + hashlib.sha256(block).digest()


def to_text(cid: bytes) -> str:
    return "b" + base64.b32encode(cid).decode("ascii").rstrip("=").lower()


def kubo_file_cid(data: bytes, chunk: int = 262144, width: int = 174) -> tuple[str, int, bytes]:
    """Return (CID text, cumulative DAG size as Kubo's add reports it, root block bytes)."""
    # nodes: (cid bytes, file bytes below, cumulative size, block)
    nodes = []
    for start in range(0, max(len(data), 1), chunk):
        piece = data[start:start + chunk]
        nodes.append((cid_v1(0x55, piece), len(piece), len(piece), piece))
    if len(nodes) == 1:
        return to_text(nodes[0][0]), nodes[0][2], nodes[0][3]
    while len(nodes) > 1:
        parents = []
        for g in range(0, len(nodes), width):
            kids = nodes[g:g + width]
            unixfs = field(1, 2) + field(3, sum(k[1] for k in kids))
            for k in kids:
                unixfs += field(4, k[1])
            block = b"".join(field(2, field(1, k[0]) + field(2, b"") + field(3, k[2])) for k in kids)
            block += field(1, unixfs)
            parents.append((cid_v1(0x70, block), sum(k[1] for k in kids),
                            len(block) + sum(k[2] for k in kids), block))
        nodes = parents
    return to_text(nodes[0][0]), nodes[0][2], nodes[0][3]
