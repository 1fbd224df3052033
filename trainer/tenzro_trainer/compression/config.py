"""The codec of a task's pseudo-gradients, as the task spec carries it (``metadata.compression``).

Three kinds, told apart by ``kind``::

    {"kind": "none"}                                         # dense float32 (tenzro_trainer.codec), the default
    {"kind": "mx", "element": "fp4_e2m1"}                    # OCP MX, one power-of-two scale per 32 values
    {"kind": "topk", "k": 64, "chunk": 4096, "bits": 2}      # SparseLoCo: top 64 of 4096 at 2 bits, error feedback

Unknown keys are errors (a misspelt ``elemnt`` would otherwise be ignored). :func:`from_metadata`
reads the section from a spec's metadata; :data:`CompressionConfig` is the pydantic model a spec
schema can register for it.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, Mapping, Union

from pydantic import BaseModel, ConfigDict, Field, RootModel, ValidationError, model_validator

from tenzro_trainer.errors import ConfigError

ElementName = Literal["int8", "fp8_e4m3", "fp8_e5m2", "fp6_e3m2", "fp6_e2m3", "fp4_e2m1"]


class _Codec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NoCompression(_Codec):
    """Dense float32 payloads, the format of :mod:`tenzro_trainer.codec` (unchanged wire)."""

    kind: Literal["none"] = "none"
    error_feedback: Literal[False] = False


class MXCodec(_Codec):
    """OCP MX block quantization: ``element`` codes, one E8M0 scale per ``block`` = 32 values."""

    kind: Literal["mx"] = "mx"
    element: ElementName = "fp8_e4m3"
    block: Literal[32] = 32
    error_feedback: bool = Field(default=False, description="carry the quantization error to the next round")


class TopKCodec(_Codec):
    """Top-``k`` magnitudes of every ``chunk`` values, values as float32 (``bits`` 32) or 2-bit
    codes with a per-chunk codebook (``bits`` 2); error feedback on by default (SparseLoCo)."""

    kind: Literal["topk"] = "topk"
    k: int = Field(default=64, ge=1, description="values kept per chunk")
    chunk: int = Field(default=4096, ge=1, le=65536, description="chunk length in values")
    bits: Literal[2, 32] = 2
    error_feedback: bool = True
    ef_decay: float = Field(default=1.0, gt=0.0, le=1.0, allow_inf_nan=False,
                            description="residual decay beta: e <- beta * e + delta (SparseLoCo); 1 = plain error feedback")

    @model_validator(mode="after")
    def _k_fits(self) -> "TopKCodec":
        if self.k > self.chunk:
            raise ValueError(f"k ({self.k}) must not exceed chunk ({self.chunk})")
        return self

    @property
    def density(self) -> float:
        """Share of values kept (k / chunk)."""
        return self.k / self.chunk


Codec = Annotated[Union[NoCompression, MXCodec, TopKCodec], Field(discriminator="kind")]


class CompressionConfig(RootModel[Codec]):
    """``metadata.compression`` of a task spec: ``CompressionConfig.model_validate(dict).root``
    is one of :class:`NoCompression`, :class:`MXCodec`, :class:`TopKCodec`."""


def parse_codec(value: Any) -> NoCompression | MXCodec | TopKCodec:
    """A codec from a dict, a JSON string, a codec object, or None (= no compression).

    Raises:
        ConfigError: unknown kind or keys, or values out of range (pydantic's messages, with paths).
    """
    if value is None:
        return NoCompression()
    if isinstance(value, (NoCompression, MXCodec, TopKCodec)):
        return value
    try:
        if isinstance(value, str):
            return CompressionConfig.model_validate_json(value).root
        return CompressionConfig.model_validate(value).root
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '<root>'}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"invalid compression codec {value!r}: {problems}") from exc


def from_metadata(metadata: Mapping[str, Any] | None) -> NoCompression | MXCodec | TopKCodec:
    """The codec named by a task spec's ``metadata["compression"]`` (absent: no compression).

    Raises:
        ConfigError: the section is not a valid codec.
    """
    return parse_codec((metadata or {}).get("compression"))


def codec_json(codec: NoCompression | MXCodec | TopKCodec) -> str:
    """Canonical JSON of a codec (every field, sorted keys, no spaces): what payload headers carry."""
    return json.dumps(codec.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
