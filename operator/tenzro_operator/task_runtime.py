"""What every role derives from a task spec: model, fragments, data shards, weight blobs.

The sponsor, each trainer, the syncer and an off-chain replay must agree on
the same model layout, the same fragment partition and the same bytes for the
same weights, or hashes on-chain stop matching. This module is that one place.

Weights of round r are F safetensors blobs, one per fragment, encoded by
`encode_weights` with fixed metadata (kind "weights", trainer "syncer", the
round that produced them; round -1 for the initial weights), so the syncer and
a replay produce identical bytes and sha256s for identical tensors.

Pseudo-gradient payloads are encoded under the spec's codec (``metadata.protocol.compression``,
`tenzro_trainer.compression`; dense float32 when absent). `TaskRuntime.decode_payload` is the one
decode path of a trainer payload: the syncer, the root-flow syncer, the local ``submit-gradient``
check, ``verify-receipt``'s replay, the watcher's round check and a trainer answering a challenge
all call it. Weights and momentum blobs stay dense (`encode_weights`, `decode_weights`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from typing import Mapping

import pandas as pd
import torch
from torch import Tensor

from tenzro_operator.errors import SpecError, TenzroError
from tenzro_operator.receipt import weights_root
from tenzro_operator.spec import ProtocolParams, TaskSpec
from tenzro_trainer.codec import decode_fragment, encode_fragment
from tenzro_trainer.compression import NoCompression, data_bytes, decode_payload
from tenzro_trainer.config import InnerConfig, ModelConfig, OuterConfig
from tenzro_trainer.data.windows import Split, shard_series, train_heldout_split
from tenzro_trainer.errors import ConfigError as TrainerConfigError
from tenzro_trainer.errors import PayloadError, PayloadRejected
from tenzro_trainer.aggregation import validate_payload
from tenzro_trainer.fragments import fragment_sizes, fragment_state, partition
from tenzro_trainer.models import build_model

INITIAL_ROUND = -1
HELDOUT_FRAC = 0.1

Layout = dict[str, tuple[tuple[int, ...], torch.dtype]]


DEFAULT_MAX_MODEL_PARAMS = 1_000_000_000  # parameters; a spec asking more is refused before anything is built
HEADER_ALLOWANCE = 65536  # bytes of safetensors header a payload may carry beyond its tensors (+512 per tensor)


class WeightsError(TenzroError):
    """Global weights fetched for a round are not what the chain committed, or malformed."""


@dataclass
class TaskRuntime:
    """The model and fragment layout of one task.

    Attributes:
        task: the task id as 0x-hex32 (what payload metadata carries).
        model_cfg: model hyperparameters from `architecture.family` / `.metadata`.
        fragments: F lists of parameter names (the partition of `tenzro_trainer.fragments`).
        layouts: per fragment, name -> (shape, dtype) of the fp32 tensors.
        sizes: parameters per fragment (the registry's reward weights).
        codec: the codec of the pseudo-gradient payloads (``metadata.protocol.compression``;
            `NoCompression`, the dense float32 payloads, by default).
    """

    task: str
    model_cfg: ModelConfig
    fragments: list[list[str]]
    layouts: list[Layout]
    sizes: list[int]
    codec: object = field(default_factory=NoCompression)  # NoCompression | MXCodec | TopKCodec

    @classmethod
    def from_spec(cls, spec: TaskSpec, max_params: int = DEFAULT_MAX_MODEL_PARAMS) -> "TaskRuntime":
        """Layout of `spec`'s model (shapes only: nothing is allocated).

        Args:
            max_params: most parameters accepted (a spec is anyone's to post; the layout is
                computed on the meta device, so a huge model is refused without using memory).

        Raises:
            SpecError: `architecture.metadata` does not describe a valid model of the family
                (unknown key, inconsistent sizes), the model has more than ``max_params``
                parameters, or F exceeds the model's parameter tensors.
        """
        try:
            cfg = ModelConfig.from_metadata(spec.architecture.family, spec.architecture.metadata)
            rt = cls.from_model_config("0x" + spec.task_id_bytes.hex(), cfg, spec.architecture.fragment_count,
                                       max_params=max_params)
        except (TrainerConfigError, ValueError) as exc:
            raise SpecError("architecture", str(exc), spec.task_id) from exc
        if spec.protocol is not None:
            rt.codec = spec.protocol.codec  # checked when the spec was parsed
        return rt

    @classmethod
    def from_model_config(cls, task: str, cfg: ModelConfig, fragment_count: int,
                          max_params: int | None = None) -> "TaskRuntime":
        """Layout of the model ``cfg`` cut into ``fragment_count`` fragments, computed on the meta
        device. Raises ValueError when the model has more than ``max_params`` parameters."""
        with torch.device("meta"):
            template = build_model(cfg).state_dict()
        n_params = sum(int(v.numel()) for v in template.values())
        if max_params is not None and n_params > max_params:
            raise ValueError(f"the model has {n_params:,} parameters, more than this operator accepts "
                             f"({max_params:,}; config max_model_params)")
        frags = partition(template, fragment_count)
        layouts = [{n: (tuple(template[n].shape), torch.float32) for n in names} for names in frags]
        return cls(task, cfg, frags, layouts, fragment_sizes(template, frags))

    # ---------------------------------------------------------------- weights

    def payload_cap(self, fragment: int) -> int:
        """Most bytes a payload (weights or pseudo-gradient) of ``fragment`` can have: its fp32
        tensors from the layout (or the codec's tensors, if larger: top-k at 32 bits with a high
        density) plus `HEADER_ALLOWANCE` and 512 bytes per tensor of header."""
        layout = self.layouts[fragment]
        n = sum(self.sizes_of(fragment).values())
        data = max(4 * n, data_bytes(self.codec, n))
        return data + HEADER_ALLOWANCE + 512 * len(layout)

    def sizes_of(self, fragment: int) -> dict[str, int]:
        """Parameter name -> number of values, of ``fragment``'s tensors."""
        out = {}
        for name, (shape, _dtype) in self.layouts[fragment].items():
            n = 1
            for d in shape:
                n *= int(d)
            out[name] = n
        return out

    # ---------------------------------------------------------------- payloads

    def decode_payload(self, data: bytes, fragment: int) -> tuple[dict[str, Tensor], dict[str, str]]:
        """One trainer's pseudo-gradient payload of ``fragment``, decoded under the task's codec:
        the one decode path of every party (see the module docstring).

        Dense (`NoCompression`): `tenzro_trainer.codec.decode_fragment`, unchanged, so names, shapes,
        dtype and finiteness are left to `validate_payload` as before. Compressed: the codec's
        tensors are checked and decoded exactly (`tenzro_trainer.compression.decode_payload`) into
        the fragment's layout, float32 and finite (a payload that does not decode raises).

        Args:
            data: the payload bytes (safetensors; about ``4 n`` bytes dense, ``n * bits / 8 + n / 32``
                for MX, fewer for top-k; n = the fragment's values).
            fragment: its index, 0 <= fragment < F.
        Returns:
            (name -> tensor, the safetensors metadata: task, round, fragment, trainer, dtype, kind;
            compressed payloads add codec and numel).
        Raises:
            PayloadError: bytes that are not a payload of the task's codec (the message says why).
        """
        if isinstance(self.codec, NoCompression):
            return decode_fragment(data)
        shapes = {name: shape for name, (shape, _dtype) in self.layouts[fragment].items()}
        try:
            return decode_payload(data, shapes, self.codec)
        except PayloadError:
            raise
        except (ValueError, RuntimeError, TypeError, KeyError, OverflowError) as exc:  # never a traceback
            raise PayloadError(f"{self.codec.kind} payload does not decode: {type(exc).__name__}: {exc}") from exc

    def initial_state(self, seed: int) -> dict[str, Tensor]:
        """Round-0 input weights: the model's initialization under `torch.manual_seed(seed)`, fp32."""
        torch.manual_seed(seed)
        return {k: v.detach().to(torch.float32).clone() for k, v in build_model(self.model_cfg).state_dict().items()}

    def encode_weights(self, state: Mapping[str, Tensor], round_index: int, kind: str = "weights") -> list[bytes]:
        """F safetensors blobs of `state` (fp32), deterministic for the same tensors and round;
        ``kind``: ``weights``, or ``momentum`` for the outer momentum a root-flow syncer pins."""
        return [
            encode_fragment(
                {n: state[n].detach().to("cpu", torch.float32) for n in names},
                dict(task=self.task, round=round_index, fragment=f, trainer="syncer", dtype="float32", kind=kind),
            )
            for f, names in enumerate(self.fragments)
        ]

    def decode_weights(self, blobs: list[bytes], hashes: list[bytes] | None = None) -> dict[str, Tensor]:
        """Full state from F fragment blobs; checks each blob's sha256 against `hashes` when given,
        and names / shapes / dtype / finiteness against the layout.

        Raises:
            WeightsError: wrong count, hash mismatch, malformed bytes or layout (says which fragment).
        """
        if len(blobs) != len(self.fragments):
            raise WeightsError(f"expected {len(self.fragments)} fragment blobs, got {len(blobs)}")
        state: dict[str, Tensor] = {}
        for f, blob in enumerate(blobs):
            if hashes is not None and hashlib.sha256(blob).digest() != hashes[f]:
                raise WeightsError(f"fragment {f}: sha256 {hashlib.sha256(blob).hexdigest()} != committed "
                                   f"{hashes[f].hex()}")
            try:
                tensors, meta = decode_fragment(blob)
                if meta.get("kind") != "weights":
                    raise WeightsError(f"fragment {f}: payload kind {meta.get('kind')!r}, expected 'weights'")
                validate_payload(tensors, self.layouts[f])
            except (PayloadError, PayloadRejected) as exc:
                raise WeightsError(f"fragment {f}: {exc}") from exc
            state.update(tensors)
        return state

    def split_state(self, state: Mapping[str, Tensor]) -> list[dict[str, Tensor]]:
        """`state` cut into its F fragments."""
        return [fragment_state(state, names) for names in self.fragments]

    @staticmethod
    def weights_root(blobs: list[bytes]) -> bytes:
        """RunRoot weights root (contracts/RECEIPT.md) of F fragment blobs."""
        return weights_root([hashlib.sha256(b).digest() for b in blobs])

    # ------------------------------------------------------------------- data

    def split(self, df: pd.DataFrame) -> Split:
        """Train / held-out split by time of the task's dataset (last windows held out); a masked model
        (``min_context`` below its context) also trains on left-padded short series, as in the simulator."""
        return train_heldout_split(df, self.model_cfg.context_len, self.model_cfg.horizon, HELDOUT_FRAC,
                                   min_context=self.model_cfg.effective_min_context)

    @staticmethod
    def shard_ids(split: Split, protocol: ProtocolParams, shard: int) -> list[str]:
        """Series ids of data shard `shard` (trainer index i trains shard i mod `protocol.shards`)."""
        return shard_series(split.unique_ids, protocol.shards)[shard % protocol.shards]


def outer_config(spec: TaskSpec) -> OuterConfig:
    """The task's outer optimizer: `OuterConfig` defaults (Nesterov, lr 0.7, momentum 0.9; DiLoCo,
    Douillard et al. 2023, Sec. 2) unless the spec's ``metadata.outer`` (``lr``, ``momentum``,
    ``nesterov``; checked by `spec.OuterParams` when the spec is parsed) says otherwise. The
    syncer and the off-chain replay both take it from here, so a replay reproduces the syncer's
    outer steps."""
    o = spec.outer
    return OuterConfig(lr=o.lr, momentum=o.momentum, nesterov=o.nesterov)


def inner_config(spec: TaskSpec, base: InnerConfig | None = None, **overrides) -> InnerConfig:
    """The inner-loop settings of a task: H from the spec, the rest from the operator's config."""
    return replace(base or InnerConfig(), steps=spec.inner_steps, **overrides)
