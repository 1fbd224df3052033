"""A forced payload its trainer published on-chain by answering a whole-payload challenge
(contracts/PROTOCOL.md §4 "Whole payload"): the ``chunk`` of its ``AvailabilityAnswered`` event
holds every chunk of the committed vector, checked by the registry against the signed
commitment. From then on the submission is live and must be counted, whether or not any IPFS
node serves its CID; so the syncer that aggregates it and the watcher that replays the round
read its values here when the CID does not answer."""

from __future__ import annotations

from torch import Tensor

from tenzro_trainer.commitment import CHUNK_BYTES, ChunkTree, decode_chunks, num_chunks


def answered_vector(chain, task_id: bytes, start_block: int, round_: int, fragment: int, trainer: str, n: int,
                    payload_root: bytes, payload_sumsq: int) -> Tensor | None:
    """The vector (float32, shape (n,)) of ``trainer``'s submission of ``fragment`` in round
    ``round_``, from the latest whole-payload answer on-chain whose bytes commit to
    ``(payload_root, payload_sumsq)`` (an answer of a rewound epoch commits to another vector and
    is passed over); None when there is none.

    Args:
        chain: a `ChainClient`. start_block: the first block that can hold an event of the run.
        n: the fragment's size in values. payload_root / payload_sumsq: the signed commitment.

    Raises:
        RpcUnavailable: the chain node does not answer.
    """
    whole = CHUNK_BYTES * num_chunks(n)
    logs = chain.get_logs(start_block, chain.block_number(), ["AvailabilityAnswered"], task_id=task_id)
    for ev in reversed(logs):
        a = ev["args"]
        if (int(a["round"]), int(a["fragment"])) != (round_, fragment) or str(a["trainer"]).lower() != trainer.lower():
            continue
        data = bytes(a["chunk"])
        if len(data) != whole:
            continue  # one chunk's answer
        vec = decode_chunks(data, n)
        if ChunkTree(vec).root == (bytes(payload_root), int(payload_sumsq)):
            return vec
    return None
