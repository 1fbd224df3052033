"""A trainer's own check of an outer-gradient payload before it is pinned and submitted.

The syncer rejects (and the registry slashes) a submission whose bytes are not the codec's
safetensors, whose metadata names another round or fragment, or whose tensors have the wrong
names, shapes or dtype, or hold NaN / inf. `check_payload` runs those same checks locally
(`TaskRuntime.decode_payload` under the spec's codec, `tenzro_trainer.aggregation.validate_payload`)
against the fragment layout of the task's spec, so a bad file is refused before any stake is at risk. The
norm screen (``norm_multiple`` x the median norm of the round) needs the other trainers'
payloads and stays the syncer's; the payload's L2 norm is returned so the caller can show it.

Usage::

    norm = check_payload(data, TaskRuntime.from_spec(spec), round_=3, fragment=1)
"""

from __future__ import annotations

from tenzro_operator.errors import TenzroError
from tenzro_operator.task_runtime import TaskRuntime
from tenzro_trainer.aggregation import validate_payload
from tenzro_trainer.errors import PayloadError, PayloadRejected

PSEUDO_GRADIENT = "pseudo_gradient"  # the codec's metadata ``kind`` of an outer gradient


class PayloadCheckError(TenzroError):
    """The payload would be rejected by the syncer; the message says which check failed and where."""

    def __init__(self, source: str, reason: str) -> None:
        self.source, self.reason = source, reason
        super().__init__(f"payload {source} would be rejected (and the trainer slashed): {reason}")


def _codec_name(runtime: TaskRuntime) -> str:
    from tenzro_trainer.compression import codec_json

    return "tenzro_trainer.codec" if runtime.codec.kind == "none" else f"the task's {codec_json(runtime.codec)}"


def check_payload(data: bytes, runtime: TaskRuntime, round_: int, fragment: int, source: str = "") -> float:
    """Decode ``data`` and check it as the syncer will for ``(round_, fragment)`` of the task.

    Args:
        data: the payload bytes (safetensors from `tenzro_trainer.codec.encode_fragment`, or of the
            spec's codec, `tenzro_trainer.compression.encode_payload`; decoded by
            `TaskRuntime.decode_payload`).
        runtime: the task's model and fragment layout (`TaskRuntime.from_spec`).
        round_: the round it is submitted for.
        fragment: the fragment index, 0 <= fragment < F.
        source: how to name the payload in errors (a file path).
    Returns:
        the payload's L2 norm (over all its tensors).
    Raises:
        PayloadCheckError: not safetensors of the codec, metadata of another kind / round /
            fragment, wrong tensor names / shapes / dtype, or non-finite values.
    """
    source = source or f"({len(data)} bytes)"
    if not 0 <= fragment < len(runtime.layouts):
        raise PayloadCheckError(source, f"fragment {fragment} does not exist: the task has "
                                        f"{len(runtime.layouts)} fragments (0..{len(runtime.layouts) - 1})")
    try:
        tensors, meta = runtime.decode_payload(data, fragment)
    except PayloadError as exc:
        raise PayloadCheckError(source, f"not a payload of the codec ({_codec_name(runtime)}): {exc}") from None
    want = {"kind": PSEUDO_GRADIENT, "round": str(round_), "fragment": str(fragment)}
    bad = {k: meta.get(k) for k, v in want.items() if meta.get(k) != v}
    if bad:
        raise PayloadCheckError(source, f"its metadata {bad} does not match {want}")
    try:
        return validate_payload(tensors, runtime.layouts[fragment])
    except PayloadRejected as exc:
        raise PayloadCheckError(source, str(exc)) from None
