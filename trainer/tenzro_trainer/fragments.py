"""Partition of a model's parameters into F fragments of near-equal size.

Algorithm (greedy longest-processing-time, Graham 1969): take the floating-point tensors of the
state dict, sort them by element count descending, ties by name ascending; put each one into
the fragment with the fewest elements so far (ties: the lowest fragment index). Inside a
fragment the names keep the state dict's order. The input to the algorithm is only the names and
shapes, which are fixed by the architecture, so every host computes the same partition.
Tensors are never split, so a fragment's size is within one largest tensor of P / F.
"""

from __future__ import annotations

from typing import Mapping

import torch
from torch import Tensor, nn

from tenzro_trainer.errors import ConfigError


def _shapes(model_or_state_dict: nn.Module | Mapping[str, Tensor]) -> list[tuple[str, int]]:
    if isinstance(model_or_state_dict, nn.Module):
        items = [(n, p) for n, p in model_or_state_dict.named_parameters()]
    else:
        items = [(n, t) for n, t in model_or_state_dict.items() if torch.is_floating_point(t)]
    return [(n, t.numel()) for n, t in items]


def partition(model_or_state_dict: nn.Module | Mapping[str, Tensor], num_fragments: int) -> list[list[str]]:
    """Parameter names per fragment (see the module docstring for the algorithm).

    Args:
        model_or_state_dict: a model (its ``named_parameters``) or a state dict (its floating tensors).
        num_fragments: F >= 1, at most the number of tensors.
    Returns:
        F lists of names; their union is every parameter, each exactly once.
    Raises:
        ConfigError: F < 1 or more fragments than tensors.
    """
    items = _shapes(model_or_state_dict)
    if num_fragments < 1 or num_fragments > len(items):
        raise ConfigError(f"fragment_count must be in [1, {len(items)}] for this model, got {num_fragments}")
    order = {n: i for i, (n, _) in enumerate(items)}
    sizes = [0] * num_fragments
    members: list[list[str]] = [[] for _ in range(num_fragments)]
    for name, numel in sorted(items, key=lambda x: (-x[1], x[0])):
        f = min(range(num_fragments), key=lambda i: (sizes[i], i))
        sizes[f] += numel
        members[f].append(name)
    return [sorted(m, key=order.__getitem__) for m in members]


def fragment_sizes(model_or_state_dict: nn.Module | Mapping[str, Tensor], fragments: list[list[str]]) -> list[int]:
    """Element count of each fragment."""
    sizes = dict(_shapes(model_or_state_dict))
    return [sum(sizes[n] for n in frag) for frag in fragments]


def fragment_state(state_dict: Mapping[str, Tensor], names: list[str]) -> dict[str, Tensor]:
    """The tensors of one fragment (detached, same dtype and device).

    Raises:
        KeyError: a name is missing from ``state_dict`` (the message names it).
    """
    missing = [n for n in names if n not in state_dict]
    if missing:
        raise KeyError(f"state dict lacks fragment tensors {missing}")
    return {n: state_dict[n].detach() for n in names}


def fragment_layout(
    model_or_state_dict: nn.Module | Mapping[str, Tensor], names: list[str], dtype: torch.dtype = torch.float32
) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """``{name: (shape, dtype)}`` of one fragment: the ``expected_shapes_dtypes`` argument of
    :func:`tenzro_trainer.aggregation.validate_payload` (pseudo-gradients are fp32 by default)."""
    if isinstance(model_or_state_dict, nn.Module):
        tensors = dict(model_or_state_dict.named_parameters())
    else:
        tensors = dict(model_or_state_dict)
    return {n: (tuple(tensors[n].shape), dtype) for n in names}
