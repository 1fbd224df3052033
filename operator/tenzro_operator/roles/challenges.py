"""A trainer's answers to availability challenges (contracts/PROTOCOL.md §4).

Anyone may challenge a trainer's submission to open one chunk of its signed commitment (or, with
chunk index 2^32 - 1, all of them: the whole payload, PROTOCOL.md §4) within the task's
``challengeSeconds``; an unanswered challenge is expired into a slash (5 % of the remaining
stake, the challenger's bond back plus a 10 % bounty). An honest trainer answers every challenge
against it: the trainer's event cursor (`tenzro_operator.chain.event_cursor.EventCursor`) hands it the
``AvailabilityChallenged`` events against it (`note`); it fetches its own payload from
IPFS by the CID it submitted, rebuilds the chunk commitment and posts the opening with
``answerAvailability`` (the challenger's bond becomes the trainer's). Challenges can arrive until
the seal, so the trainer keeps answering after the last round while any is pending.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field

from tenzro_operator.chain import ZERO_ADDRESS, ChainClient, ChunkOpening
from tenzro_operator.errors import ChainRevert, IpfsError, IpfsUnavailable
from tenzro_operator.ipfs import IpfsClient
from tenzro_operator.task_runtime import TaskRuntime
from tenzro_trainer.commitment import ChunkTree, flatten_fragment
from tenzro_trainer.errors import PayloadError

__all__ = ["ChallengeAnswerer"]

log = logging.getLogger("tenzro.trainer")


@dataclass
class ChallengeAnswerer:
    """Answers the availability challenges against one trainer in one run.

    Args:
        chain: a `ChainClient` with the trainer's account (it sends ``answerAvailability``).
        ipfs: the trainer's IPFS node (which pinned its payloads).
        task_id: the run (bytes32).
        from_block: the first block that can hold an event of the run (where its own
            submissions are looked up).
        runtime: the run's `TaskRuntime`: its payloads are decoded under the task's codec
            (`TaskRuntime.decode_payload`) to rebuild the committed vector.
    """

    chain: ChainClient
    ipfs: IpfsClient
    task_id: bytes
    from_block: int
    runtime: TaskRuntime
    answered: int = 0
    _open: set[tuple[int, int]] = field(default_factory=set)  # (round, fragment) challenged
    _run_start: int = field(init=False)

    def __post_init__(self) -> None:
        self._run_start = self.from_block

    @property
    def open(self) -> list[tuple[int, int]]:
        """``(round, fragment)`` of the challenges noted and not yet answered or found closed."""
        return sorted(self._open)

    def note(self, round_: int, fragment: int) -> None:
        """A challenge against this trainer's submission of (round, fragment) was read."""
        self._open.add((round_, fragment))

    def forget(self, round_: int, fragment: int) -> None:
        """Stop answering the challenge of (round, fragment) (a noted one that will not be answered)."""
        self._open.discard((round_, fragment))

    def poll(self) -> int:
        """Answer every noted challenge still pending. Returns the number answered in this call. A
        payload this trainer can no longer produce (lost from IPFS, or not the vector it committed
        to) is logged and left to expire: nothing else can answer it.

        Raises:
            ChainError / IpfsUnavailable: the RPC or IPFS node is down (the caller retries).
        """
        me = self.chain.address
        done = 0
        for r, f in sorted(self._open):
            self._open.discard((r, f))
            pending = self.chain.availability_challenge(self.task_id, r, f, me)
            if str(pending["challenger"]).lower() == ZERO_ADDRESS:
                continue  # answered or expired already
            try:
                opening = self._opening(r, f, int(pending["chunkIndex"]), bytes(pending["payloadRoot"]),
                                        int(pending["payloadSumsq"]))
            except IpfsUnavailable:
                self._open.add((r, f))  # our own node is down: try again on the next poll
                raise
            if opening is None:
                continue
            try:
                self.chain.answer_availability(self.task_id, r, f, me, opening)
            except ChainRevert as exc:
                if exc.error_name not in ("Registry__NoChallenge", "Registry__ChallengeDeadline"):
                    raise
                log.warning("availability challenge round=%d fragment=%d not answered: %s", r, f, exc.error_name)
                continue
            done += 1
            log.info("answered the availability challenge of round %d fragment %d (chunk %d)", r, f,
                     opening.chunk_index)
        self.answered += done
        return done

    def _opening(self, r: int, f: int, chunk: int, root: bytes, sumsq: int) -> ChunkOpening | None:
        """The opening of chunk ``chunk`` of this trainer's committed payload of (r, f) (every chunk
        for ``ChunkOpening.WHOLE_PAYLOAD``), or None."""
        posted = self._submitted(r, f)
        if posted is None:  # a lagging node: the challenge is on-chain, so the submission is too
            log.warning("submission of round %d fragment %d not found on this node yet: answering later", r, f)
            self._open.add((r, f))
            return None
        cid, payload_hash = posted
        try:
            raw = self.ipfs.cat(cid, max_bytes=self.runtime.payload_cap(f))
            if hashlib.sha256(raw).digest() != payload_hash:
                # the bytes are not the ones this trainer declared: the syncer could not accept them,
                # so answering would only take the challenger's bond for an unusable payload
                log.error("not answering the challenge of round %d fragment %d: payload %s does not hash to the "
                          "payloadHash this trainer submitted", r, f, cid)
                return None
            tensors, _ = self.runtime.decode_payload(raw, f)
            tree = ChunkTree(flatten_fragment(tensors))
        except IpfsUnavailable:
            raise
        except (IpfsError, PayloadError) as exc:
            log.error("cannot answer the challenge of round %d fragment %d: payload %s: %s", r, f, cid, exc)
            return None
        # a chunk, or the whole payload (PROTOCOL.md §4 "Whole payload": every chunk, ChunkOpening.whole)
        if tree.root != (root, sumsq) or (chunk >= tree.num_chunks and chunk != ChunkOpening.WHOLE_PAYLOAD):
            log.error("cannot answer the challenge of round %d fragment %d: payload %s is not the committed vector",
                      r, f, cid)
            return None
        return ChunkOpening.of(tree, chunk)

    def _submitted(self, r: int, f: int) -> tuple[str, bytes] | None:
        """``(cid, payloadHash)`` of this trainer's submission of (r, f), from its event."""
        me = self.chain.address
        for ev in self.chain.get_logs(self._run_start, self.chain.block_number(), ["GradientSubmitted"],
                                      task_id=self.task_id):
            a = ev["args"]
            if a["trainer"] == me and int(a["round"]) == r and int(a["fragment"]) == f:
                return str(a["cid"]), bytes(a["payloadHash"])
        return None
