"""Activation patching: which heads cause an output (Vig et al., 2020; Meng et al., 2022; Wang et al., 2022).

Run the model on a *clean* input and on a *corrupted* one that differs in what matters (a repeat broken, a month
changed), then run the corrupted input again with one activation taken from the clean run: the metric of that run
says how much of the clean behaviour the activation carries.

* :func:`patch_heads` -> ``(num_layers, num_heads)``: one head's output (or query, key, value) at every position,
  or ``(num_layers, num_heads, T)`` with ``positions="each"``, one position at a time;
* :func:`patch_residual` -> ``(num_layers, T)``: the residual stream before each layer, one position at a time;
* :func:`run_patched`: the metric with any set of :class:`Patch` applied at once.

Each patch is a batch of its own: many patches run as one forward pass over copies of the corrupted batch, each
copy with its own patch (the rows of a batch never mix), in chunks that bound the memory. The metric is called once
per patch on that patch's ``(B, T, V)`` logits and must return a 0-d tensor. Clean and corrupted inputs are
``(B, T)`` ids of one shape for a decoder, ``(source, target)`` pairs for a translation model (see
:mod:`attnlab.heads.sites`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnlab.heads.hooks import Place, as_found, forward, record, split_heads
from attnlab.heads.sites import POSITIONS, RESIDUAL, Inputs, Patchable, patchable
from attnlab.i18n import tr

Metric = Callable[[Tensor], Tensor]
#: a tensor as JSON: nested lists of floats, None where NaN
Listed = float | None | list["Listed"]
#: the most bytes one batched pass of patches may hold in logits and activations (a gpt2-small-sized model at
#: T = 64 runs 16 patches a pass)
PASS_BYTES = 2**28


@dataclass(frozen=True)
class Patch:
    """One activation of the clean run put into the corrupted run.

    ``site``: ``"output"``, ``"query"``, ``"key"``, ``"value"`` (of ``head``; None: every head of the layer) or
    ``"residual"`` (the residual stream before ``layer``; ``head`` None). ``position``: one position, or None: all.
    """

    layer: int
    head: int | None = None
    site: str = "output"
    position: int | None = None


def check_metric(value: object) -> Tensor:
    """A metric's value: it must be a 0-d tensor (one number for the whole batch)."""
    if isinstance(value, Tensor) and value.dim() != 0:
        raise ValueError(tr("metric must return a 0-d tensor (one number for the batch, e.g. a mean), got a tensor "
                            "of shape {shape}", shape=tuple(value.shape)))
    if not isinstance(value, Tensor):
        raise ValueError(tr("metric must return a 0-d tensor (one number for the batch, e.g. a mean), got {got}",
                            got=type(value).__name__))
    return value


def metric_of(pm: Patchable, inputs: Inputs, metric: Metric) -> Tensor:
    with torch.no_grad():
        return check_metric(metric(pm.run(inputs))).detach().float()


def baselines(model: nn.Module, clean: Inputs, corrupt: Inputs, metric: Metric) -> tuple[float, float]:
    """The metric of the clean run and of the corrupted run: the two ends a patch's value lies between (mostly)."""
    pm = patchable(model)
    clean, corrupt = pm.check_pair(clean, corrupt)
    with as_found(model):
        return float(metric_of(pm, clean, metric)), float(metric_of(pm, corrupt, metric))


def recovered(values: Tensor, clean_value: float, corrupt_value: float) -> Tensor:
    """``(values - corrupt) / (clean - corrupt)``: 0 where a patch does nothing, 1 where it restores the clean
    metric."""
    return (values - corrupt_value) / (clean_value - corrupt_value)


def listed(values: Tensor, digits: int = 5) -> Listed:
    """A tensor as nested lists of rounded floats for JSON, ``None`` where it is NaN (a layer not measured)."""
    if values.dim() == 0:
        return None if math.isnan(float(values)) else round(float(values), digits)
    return [listed(v, digits) for v in values]


def _places(pm: Patchable, patches: Sequence[Patch]) -> set[Place]:
    return {(p.layer, p.site) for p in patches}


def check_patch(pm: Patchable, patch: Patch, inputs: Inputs) -> Patch:
    pm.check_site(patch.site, residual=True)
    pm.check_layer(patch.layer)
    if patch.head is not None:
        if patch.site == RESIDUAL:
            raise ValueError(tr("a patch of the residual stream has no head; give head=None, got {head!r}",
                                head=patch.head))
        pm.check_head(patch.head, patch.site)
    length = pm.length(inputs, patch.site)
    if patch.position is not None and (isinstance(patch.position, bool) or not isinstance(patch.position, int)
                                       or not 0 <= patch.position < length):
        raise ValueError(tr("position must be None (all) or in 0..{last}, got {position!r}", last=length - 1,
                            position=patch.position))
    return patch


def sweep(pm: Patchable, sources: dict[Place, Tensor], corrupt: Inputs, metric: Metric,
          groups: Sequence[Sequence[Patch]]) -> Tensor:
    """``(len(groups),)``: the metric of the corrupted run with each group of patches applied together.

    ``sources`` holds the tensors to put in at every place the patches name, ``(B, T, width)``: the clean run's (or
    path patching's). Groups run side by side, as many per pass as :data:`PASS_BYTES` allows."""
    batch = pm.batch(corrupt)
    tokens = batch * pm.target(corrupt).shape[1]
    width = pm.unembed.weight.shape[1]
    per_copy = 4 * tokens * (pm.vocab_size + 16 * width)  # float32 logits and activations of one copy
    chunk = max(1, min(len(groups), PASS_BYTES // per_copy))
    out: list[Tensor] = []
    with torch.no_grad():
        for start in range(0, len(groups), chunk):
            part = groups[start:start + chunk]
            edits = {place: _masked_edit(pm, place, sources[place], part, batch)
                     for place in {pl for group in part for pl in _places(pm, group)}}
            logits, _ = forward(pm, pm.tiled(corrupt, len(part)), edits)
            logits = logits.unflatten(0, (len(part), batch))
            out.extend(check_metric(metric(logits[g])).detach().float() for g in range(len(part)))
    return torch.stack(out) if out else torch.empty(0)


def _masked_edit(pm: Patchable, place: Place, source: Tensor, part: Sequence[Sequence[Patch]], batch: int):
    """The edit at ``place`` for a chunk of groups: each copy's patched heads and positions from ``source``."""
    site = place[1]
    heads = pm.heads(site)
    length = source.shape[1]
    mask = torch.zeros(len(part), 1, length, heads, 1, dtype=torch.bool, device=source.device)
    for g, group in enumerate(part):
        for p in group:
            if (p.layer, p.site) == place:
                mask[g, 0, slice(None) if p.position is None else p.position,
                     slice(None) if p.head is None else p.head] = True
    src = split_heads(source, heads)[None]  # (1, B, T, H, d)

    def edit(t: Tensor) -> Tensor:
        copies = split_heads(t, heads).unflatten(0, (len(part), batch))  # (G, B, T, H, d)
        return torch.where(mask, src.to(t.dtype), copies).flatten(0, 1).flatten(-2)

    return edit


def run_patched(model: nn.Module, clean: Inputs, corrupt: Inputs, metric: Metric,
                patches: Sequence[Patch]) -> Tensor:
    """The metric (0-d) of the corrupted run with every one of ``patches`` taken from the clean run at once."""
    pm = patchable(model)
    clean, corrupt = pm.check_pair(clean, corrupt)
    patches = [check_patch(pm, p, corrupt) for p in patches]
    with as_found(model):
        return sweep(pm, record(pm, clean, _places(pm, patches)), corrupt, metric, [patches])[0]


def check_positions(positions: object) -> str:
    if positions not in POSITIONS:
        raise ValueError(tr("positions must be 'all' (a head at every position at once) or 'each' (one position "
                            "at a time), got {positions!r}", positions=positions))
    return str(positions)


def head_patches(pm: Patchable, layers: list[int], site: str, length: int | None) -> list[Patch]:
    """Every head of ``layers`` at ``site``, in (layer, head[, position]) order; ``length``: one per position."""
    heads = range(pm.heads(site))
    if length is None:
        return [Patch(layer, h, site) for layer in layers for h in heads]
    return [Patch(layer, h, site, t) for layer in layers for h in heads for t in range(length)]


def spread(pm: Patchable, values: Tensor, layers: list[int], shape: tuple[int, ...]) -> Tensor:
    """Values of ``layers`` (in order) into a ``(num_layers, *shape)`` tensor, NaN for the layers not measured."""
    out = torch.full((pm.num_layers, *shape), math.nan)
    out[layers] = values.reshape(len(layers), *shape)
    return out


def patch_heads(model: nn.Module, clean: Inputs, corrupt: Inputs, metric: Metric, positions: str = "all",
                site: str = "output", layers: Sequence[int] | None = None) -> Tensor:
    """Activation patching, head by head.

    Args:
        model: a decoder or a translation model (:func:`attnlab.heads.sites.patchable`).
        clean, corrupt: ``(B, T)`` ids of one shape (a translation model's: ``(source, target)`` pairs).
        metric: logits ``(B, T, V)`` -> a 0-d tensor.
        positions: ``"all"``: a head's tensor at every position at once; ``"each"``: one position at a time.
        site: ``"output"`` (the head's slice of ``out_proj``'s input), ``"query"``, ``"key"`` or ``"value"``.
        layers: only these layers (the others' rows are NaN); None: all.

    Returns:
        ``(num_layers, heads)`` or, with ``"each"``, ``(num_layers, heads, T)``: the metric of the corrupted run
        with that head (at that position) from the clean run. ``heads`` is ``num_kv_heads`` for the key and value
        sites of a grouped-query model; ``T`` is the source's length for a cross-attention's key and value.

    Example:
        >>> effect = patch_heads(model, clean, corrupt, lambda logits: logits[:, -1, 5].mean())   # doctest: +SKIP
    """
    pm = patchable(model)
    clean, corrupt = pm.check_pair(clean, corrupt)
    site, positions = pm.check_site(site), check_positions(positions)
    layers = pm.check_layers(layers)
    length = pm.length(corrupt, site) if positions == "each" else None
    with as_found(model):
        sources = record(pm, clean, [(layer, site) for layer in layers])
        values = sweep(pm, sources, corrupt, metric, [[p] for p in head_patches(pm, layers, site, length)])
    return spread(pm, values, layers, (pm.heads(site),) if length is None else (pm.heads(site), length))


def patch_residual(model: nn.Module, clean: Inputs, corrupt: Inputs, metric: Metric,
                   layers: Sequence[int] | None = None) -> Tensor:
    """``(num_layers, T)``: the metric of the corrupted run with the residual stream before layer ``l`` at position
    ``t`` (block ``l``'s input there) taken from the clean run; a translation model's decoder's stream."""
    pm = patchable(model)
    clean, corrupt = pm.check_pair(clean, corrupt)
    layers = pm.check_layers(layers)
    length = pm.length(corrupt, RESIDUAL)
    with as_found(model):
        sources = record(pm, clean, [(layer, RESIDUAL) for layer in layers])
        groups = [[Patch(layer, None, RESIDUAL, t)] for layer in layers for t in range(length)]
        values = sweep(pm, sources, corrupt, metric, groups)
    return spread(pm, values, layers, (length,))
