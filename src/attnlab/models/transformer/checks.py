"""The door of the encoder-decoder: source and target ids, their padding masks, the targets and the memory,
all checked with one host read (:func:`~attnlab.models.checks.read_facts`); the blocks inside trust the result.

A padding mask left out (None) is derived from the ids: positions holding ``pad_id`` are padding. An explicit
mask wins (so a batch may use ``pad_id`` as a real token if it says so). The memory handed to ``decode`` carries
no ids, so its mask must be given; None there means every memory position is real.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from attnlab.functional.masks import key_mask
from attnlab.i18n import tr
from attnlab.models.checks import check_attention_mask_dtype, check_ids_tensor, id_range_error, read_facts


@dataclass
class Door:
    """What one call brings to the door; :func:`check_inputs` turns it into key masks."""

    owner: str
    vocab_size: int
    context_length: int
    pad_id: int
    src: Tensor | None = None
    tgt: Tensor | None = None
    targets: Tensor | None = None
    memory: Tensor | None = None
    src_mask: Tensor | None = None
    tgt_mask: Tensor | None = None
    offset: int = 0  # target positions already in a cache
    cached: bool = False


def _check_mask(owner: str, name: str, mask: Tensor | None, shape: tuple[int, ...]) -> None:
    if mask is None:
        return
    if not isinstance(mask, Tensor):
        raise TypeError(tr("{owner}: {name} must be a torch.Tensor, got {got}", owner=owner, name=name,
                           got=type(mask).__name__))
    check_attention_mask_dtype(owner, mask)
    if tuple(mask.shape) != shape:
        raise ValueError(tr("{owner}: {name} must have shape {shape} (1 = real token, 0 = padding), got {got}",
                            owner=owner, name=name, shape=shape, got=tuple(mask.shape)))


def _check_shapes(d: Door) -> None:
    """Shapes and dtypes only: nothing read from the device."""
    batch = None
    if d.src is not None:
        check_ids_tensor(d.src, d.owner, "src")
        batch = d.src.shape[0]
        if d.src.shape[1] > d.context_length:
            raise ValueError(tr("{owner}: src has {n} tokens, more than context_length={context_length}; shorten "
                                "the source", owner=d.owner, n=d.src.shape[1], context_length=d.context_length))
        _check_mask(d.owner, "src_mask", d.src_mask, tuple(d.src.shape))
    if d.memory is not None:
        if not isinstance(d.memory, Tensor) or not torch.is_floating_point(d.memory) or d.memory.dim() != 3:
            got = tuple(d.memory.shape) if isinstance(d.memory, Tensor) else type(d.memory).__name__
            raise ValueError(tr("{owner}: memory must be the encoder's output, a float (B, S, D) tensor, got {got}",
                                owner=d.owner, got=got))
        batch = d.memory.shape[0]
        _check_mask(d.owner, "src_mask", d.src_mask, tuple(d.memory.shape[:2]))
    if d.tgt is not None:
        check_ids_tensor(d.tgt, d.owner, "tgt")
        if batch is not None and d.tgt.shape[0] != batch:
            raise ValueError(tr("{owner}: tgt must have the source's batch size {batch}, got {got}", owner=d.owner,
                                batch=batch, got=d.tgt.shape[0]))
        if d.offset + d.tgt.shape[1] > d.context_length:
            raise ValueError(tr("{owner}: {offset} cached + {n} target tokens exceed context_length={context_length}",
                                owner=d.owner, offset=d.offset, n=d.tgt.shape[1], context_length=d.context_length))
        if d.cached and d.tgt_mask is not None:
            raise ValueError(tr("{owner}: tgt_mask cannot be combined with a cache: decoding feeds real tokens only",
                                owner=d.owner))
        _check_mask(d.owner, "tgt_mask", d.tgt_mask, tuple(d.tgt.shape))
    if d.targets is not None:
        check_ids_tensor(d.targets, d.owner, "targets")
        if d.tgt is None or d.targets.shape != d.tgt.shape:
            raise ValueError(tr("{owner}: targets must have the shape of tgt {shape}, got {got}", owner=d.owner,
                                shape=None if d.tgt is None else tuple(d.tgt.shape), got=tuple(d.targets.shape)))


def check_inputs(d: Door) -> tuple[Tensor | None, Tensor | None]:
    """Check everything ``d`` holds with one host read; return the source's and the target's key masks
    ``(B, 1, 1, S)`` and ``(B, 1, 1, T)``, each None when nothing is padded (the fused kernels then run unmasked)."""
    _check_shapes(d)
    src_mask = d.src_mask if d.src_mask is not None or d.src is None else d.src != d.pad_id
    tgt_mask = d.tgt_mask if d.tgt_mask is not None or d.tgt is None or d.cached else d.tgt != d.pad_id
    ids = {name: t for name, t in (("src", d.src), ("tgt", d.tgt), ("targets", d.targets)) if t is not None}
    masks = {name: m for name, m in (("src_mask", src_mask), ("tgt_mask", tgt_mask)) if m is not None}
    facts = [f for t in ids.values() for f in (t.min(), t.max())]
    facts += [f for m in masks.values() for f in (((m != 0) & (m != 1)).any(), m.all())]
    values = iter(read_facts(*facts)) if facts else iter(())
    for name in ids:
        error = id_range_error(d.owner, name, next(values), next(values), d.vocab_size)
        if error is not None:
            raise error
    keys = {}
    for name, m in masks.items():
        bad, all_real = next(values), next(values)
        if bad:
            raise ValueError(tr("{owner}: {name} must contain only 0 and 1", owner=d.owner, name=name))
        keys[name] = None if all_real else key_mask(m)
    return keys.get("src_mask"), keys.get("tgt_mask")
