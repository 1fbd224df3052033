"""Error feedback: the part of a pseudo-gradient a lossy codec did not send is kept by the trainer
and added to the next round's (Seide et al. 2014; Karimireddy et al. 2019; DeMo, Peng et al. 2024;
SparseLoCo, Sarfi et al. 2025, arXiv:2508.15706).

Per fragment f and round r, with pseudo-gradient ``delta`` and residual ``e`` (both float32 (n,)):

    c = beta * e + delta            # compensated (beta = ef_decay; 1 = plain error feedback)
    sent = decode(encode(c))        # exactly what the syncer decodes
    e = c - sent                    # the residual, carried to round r + 1

With ``beta = 1``, after R rounds ``sum(sent) + e_R = sum(delta)`` up to float32 rounding of the
running sums (tested).

Restart safety: :class:`PayloadCompressor` saves its state with :meth:`~PayloadCompressor.save`
(one safetensors file, written to a temporary file in the same folder, fsynced, then
``os.replace``d, so a crash leaves the old or the new file, never a torn one). The state records
the last round it encoded and keeps that round's input residual too, so re-encoding the same round
after a restart (the syncer never got the payload, the trainer retried) gives the same bytes instead
of counting the round twice.

Usage::

    comp = PayloadCompressor(TopKCodec(k=64, chunk=4096))           # or PayloadCompressor.load(path, codec)
    data = comp.encode(round=r, fragment=f, tensors=delta, metadata=meta)
    comp.save(path)                                                  # before submitting the payload
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Mapping

import torch
from torch import Tensor

from tenzro_trainer.codec import read_safetensors, write_safetensors
from tenzro_trainer.compression.config import NoCompression, codec_json, parse_codec
from tenzro_trainer.compression.wire import AnyCodec, compress, decompress, encode_payload, flatten, write_payload
from tenzro_trainer.errors import ConfigError, ErrorFeedbackStateError, PayloadError

STATE_FORMAT = "tenzro/error-feedback/v1"


class PayloadCompressor:
    """One trainer's encoder of pseudo-gradient payloads, with per-fragment error feedback.

    Attributes:
        codec: the task's codec.
        round: the last round encoded (-1 before any).
        residual: fragment -> (n,) float32, the residual after round ``round``.
        previous: fragment -> (n,) float32, the residual before round ``round`` (to re-encode it).
    """

    def __init__(self, codec: AnyCodec | Mapping | str | None):
        self.codec = parse_codec(codec)
        self.round = -1
        self.residual: dict[int, Tensor] = {}
        self.previous: dict[int, Tensor] = {}

    @property
    def feedback(self) -> bool:
        return bool(self.codec.error_feedback)

    def encode(self, round: int, fragment: int, tensors: Mapping[str, Tensor], metadata: Mapping[str, object]) -> bytes:
        """The payload bytes of ``tensors`` (one fragment's pseudo-gradient) for ``round``.

        Rounds must not go backwards; encoding a round again recomputes it from the residual it
        started from (idempotent).

        Raises:
            ConfigError: ``round`` is older than the last one encoded.
            ValueError: non-finite or non-float32 tensors; PayloadError: bad metadata.
        """
        if not self.feedback or isinstance(self.codec, NoCompression):
            return encode_payload(tensors, metadata, self.codec)
        if round < self.round:
            raise ConfigError(f"error feedback: round {round} is older than the last round encoded ({self.round})")
        if round > self.round:
            self.previous = dict(self.residual)
            self.round = round
        delta, _ = flatten(tensors)
        base = self.previous.get(fragment)
        if base is not None and base.shape != delta.shape:
            raise ErrorFeedbackStateError(f"fragment {fragment}: residual has {base.numel()} values, "
                                          f"the pseudo-gradient {delta.numel()}")
        compensated = delta if base is None else self._decayed(base) + delta
        parts = compress(compensated, self.codec)
        sent = decompress(parts, compensated.numel(), self.codec)
        data = write_payload(parts, metadata, self.codec, delta.numel())  # bad metadata raises before the residual moves
        self.residual[fragment] = compensated - sent
        return data

    def _decayed(self, e: Tensor) -> Tensor:
        beta = float(getattr(self.codec, "ef_decay", 1.0))
        return e if beta == 1.0 else e * torch.tensor(beta, dtype=torch.float32)

    # ---------------------------------------------------------------- state

    def state_dict(self) -> tuple[dict[str, Tensor], dict[str, str]]:
        """(tensors ``residual/<f>``, ``previous/<f>``; metadata ``format``, ``codec``, ``round``)."""
        tensors = {f"residual/{f}": t.contiguous() for f, t in self.residual.items()}
        tensors.update({f"previous/{f}": t.contiguous() for f, t in self.previous.items()})
        return tensors, {"format": STATE_FORMAT, "codec": codec_json(self.codec), "round": str(self.round)}

    def save(self, path: str | os.PathLike) -> Path:
        """Write the state to ``path`` atomically (temporary file in the same folder, fsync, rename)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tensors, meta = self.state_dict()
        data = write_safetensors(tensors, meta)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path

    @classmethod
    def load(cls, path: str | os.PathLike, codec: AnyCodec | Mapping | str | None) -> "PayloadCompressor":
        """A compressor with the state saved at ``path``; a fresh one when the file does not exist.

        Raises:
            ErrorFeedbackStateError: the file is not a state file, or was saved under another codec
                (its residuals would be meaningless for this one).
        """
        comp = cls(codec)
        path = Path(path)
        if not path.exists():
            return comp
        try:
            tensors, meta = read_safetensors(path.read_bytes())
        except (PayloadError, OSError) as exc:
            raise ErrorFeedbackStateError(f"error-feedback state {path} is unreadable: {exc}") from exc
        if meta.get("format") != STATE_FORMAT:
            raise ErrorFeedbackStateError(f"{path} is not an error-feedback state (format {meta.get('format')!r})")
        if meta.get("codec") != codec_json(comp.codec):
            raise ErrorFeedbackStateError(f"{path} was saved under codec {meta.get('codec')}, the task's codec is "
                                          f"{codec_json(comp.codec)}; delete it to start without residuals")
        try:
            comp.round = int(meta["round"])
        except (KeyError, ValueError):
            raise ErrorFeedbackStateError(f"{path}: metadata 'round' missing or not an integer: {meta.get('round')!r}") from None
        for name, t in tensors.items():
            kind, _, f = name.partition("/")
            if kind not in ("residual", "previous") or not f.isdigit() or t.dtype != torch.float32 or t.dim() != 1:
                raise ErrorFeedbackStateError(f"{path}: unexpected tensor {name!r} ({t.dtype}, {tuple(t.shape)})")
            getattr(comp, kind)[int(f)] = t
        return comp
