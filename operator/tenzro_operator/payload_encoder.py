"""A trainer's encoder of its pseudo-gradient payloads for one run, under the task's codec.

The spec's ``metadata.protocol.compression`` (`TaskRuntime.codec`) picks the codec; absent, the
payload is the dense float32 safetensors of `tenzro_trainer.codec.encode_fragment`, byte for byte
as before. A lossy codec with error feedback (top-k by default, MX when asked) keeps per fragment
the part of the pseudo-gradient it did not send (`tenzro_trainer.compression.PayloadCompressor`);
that state is saved to ``state_path`` (one safetensors file, written to a temporary file, fsynced
and renamed: a crash leaves the old or the new state, never a torn one) and loaded again when the
trainer restarts, so a restarted trainer continues with the same residuals. Re-encoding the last
round after a restart (its payloads never landed) gives the same bytes instead of counting the
round twice.

What the trainer commits to (PROTOCOL.md §2, the chunk tree of the signed submission) is the vector
every other party decodes from the bytes, so `PayloadEncoder.encode` returns it beside the bytes:
the payload decoded through `TaskRuntime.decode_payload`, the one decode path.

Usage::

    enc = PayloadEncoder(runtime, data_dir / f"trainer-ef-{task}.safetensors")   # loads saved residuals
    blob, flat = enc.encode(r, f, delta, metadata)     # bytes to pin; (n,) float32 decoded vector
    enc.save()                                         # after the round's fragments, before sending
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Mapping

from torch import Tensor

from tenzro_operator.errors import TenzroError
from tenzro_operator.task_runtime import TaskRuntime
from tenzro_trainer.codec import encode_fragment
from tenzro_trainer.commitment import flatten_fragment
from tenzro_trainer.compression import NoCompression, PayloadCompressor
from tenzro_trainer.errors import ErrorFeedbackStateError

__all__ = ["PayloadEncoder"]

log = logging.getLogger("tenzro.trainer")


class PayloadEncoder:
    """Encodes one trainer's pseudo-gradients of one run (see the module docstring). Thread-safe:
    the trainer encodes its fragments in a pool of threads.

    Args:
        runtime: the run's `TaskRuntime` (its ``codec`` and fragment layouts).
        state_path: the error-feedback state file (only written when the codec has error feedback).

    Raises:
        TenzroError: the state file is unreadable or was saved under another codec.
    """

    def __init__(self, runtime: TaskRuntime, state_path: str | Path) -> None:
        self.runtime = runtime
        self.state_path = Path(state_path)
        self.codec = runtime.codec
        self._lock = threading.Lock()
        try:
            self.compressor = PayloadCompressor.load(self.state_path, self.codec) if self.feedback \
                else PayloadCompressor(self.codec)
        except ErrorFeedbackStateError as exc:
            raise TenzroError(f"trainer: {exc}") from None
        if self.feedback and self.compressor.round >= 0:
            log.info("restored error feedback after round %d (%d fragment(s)) from %s", self.compressor.round,
                     len(self.compressor.residual), self.state_path)

    @property
    def dense(self) -> bool:
        """Whether payloads are the dense float32 ones (no compression)."""
        return isinstance(self.codec, NoCompression)

    @property
    def feedback(self) -> bool:
        """Whether the codec carries error feedback (a state to save)."""
        return bool(getattr(self.codec, "error_feedback", False))

    @property
    def round(self) -> int:
        """The last round encoded with error feedback (-1 before any, or without feedback)."""
        return self.compressor.round

    def encode(self, round_: int, fragment: int, tensors: Mapping[str, Tensor],
               metadata: Mapping[str, object]) -> tuple[bytes, Tensor]:
        """The payload of one fragment's pseudo-gradient and the vector it decodes to.

        Args:
            round_: the round (rounds never go backwards; the last one may be encoded again).
            fragment: the fragment index.
            tensors: name -> float32 tensor, the fragment's pseudo-gradient ``global - local``.
            metadata: the six keys of `tenzro_trainer.codec.METADATA_KEYS` (task, round, fragment,
                trainer, dtype ``float32``, kind ``pseudo_gradient``).
        Returns:
            (payload bytes, (n,) float32 vector the syncer decodes, in `flatten_fragment` order).
            Dense: ``encode_fragment(tensors, metadata)`` and the tensors flattened, as before.
        Raises:
            ValueError: non-finite or non-float32 tensors under a compressed codec (the trainer's
                ``nan`` fault then sends them dense, which the syncer rejects as Malformed).
        """
        if self.dense:
            return encode_fragment(tensors, metadata), flatten_fragment(tensors)
        with self._lock:  # the compressor's round / residuals move together
            data = self.compressor.encode(round_, fragment, tensors, metadata)
        decoded, _ = self.runtime.decode_payload(data, fragment)
        return data, flatten_fragment(decoded)

    def save(self) -> Path | None:
        """Write the error-feedback state (atomically); nothing without error feedback. Returns the path."""
        if not self.feedback:
            return None
        with self._lock:
            return self.compressor.save(self.state_path)
