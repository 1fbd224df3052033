"""Error classes of the trainer. One base class; each subclass says what was wrong and where."""

from __future__ import annotations


class TrainerError(Exception):
    """Base class of every error the trainer raises on bad input."""


class ConfigError(TrainerError, ValueError):
    """A model / inner / outer configuration or task metadata is invalid."""


class DataError(TrainerError, ValueError):
    """A timeseries file or frame does not have the expected long format."""


class DatasetHashMismatch(DataError):
    """The dataset's canonical sha256 differs from the one in the task spec."""

    def __init__(self, expected: str, actual: str):
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"dataset hash mismatch: task spec expects sha256 {expected}, "
            f"the loaded data hashes to {actual} (see tenzro_trainer.data.hashing for the encoding)"
        )


class PayloadError(TrainerError, ValueError):
    """Bytes that should hold a safetensors fragment payload are malformed, truncated or incomplete."""


class ErrorFeedbackStateError(TrainerError, ValueError):
    """A trainer's error-feedback state file is unreadable, was saved under another codec, or does
    not fit the fragment (``tenzro_trainer.compression.feedback``)."""


class PayloadRejected(TrainerError):
    """A decoded pseudo-gradient payload failed validation.

    Attributes:
        reason: one of ``"names"``, ``"shape"``, ``"dtype"``, ``"non_finite"``, ``"norm"``.
        tensor: the offending tensor name, or ``None`` when the whole payload is at fault.
        detail: a human-readable explanation.
    """

    def __init__(self, reason: str, detail: str, tensor: str | None = None):
        self.reason = reason
        self.tensor = tensor
        self.detail = detail
        where = f" (tensor {tensor!r})" if tensor is not None else ""
        super().__init__(f"payload rejected: {reason}{where}: {detail}")


class AggregationError(TrainerError, ValueError):
    """An aggregation rule cannot be applied to the given inputs (e.g. too few for Krum's f)."""
