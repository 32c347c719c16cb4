"""Attention rollout (Abnar & Zuidema, 2020, "Quantifying Attention Flow in Transformers", §3).

A layer's attention says how each token mixes the previous layer's vectors, but the residual connection carries
each vector through unchanged as well, and after a few layers the mixtures are mixed again. Rollout follows both:

    Â_l = 0.5 · mean_h A_l,h + 0.5 · I          one layer: half attention, half the residual path
    R   = Â_L · … · Â_2 · Â_1                   every layer, composed

Row ``i`` of ``R`` says how much of the top layer's token ``i`` comes from input token ``j``; each row sums to 1.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from attnlab.i18n import tr


def check_attentions(attentions: Sequence[Tensor]) -> list[Tensor]:
    """The per-layer weights ``(H, T, T)`` as float64, checked: at least one layer, square, one ``T`` for all."""
    if isinstance(attentions, Tensor) or not isinstance(attentions, Sequence) or not attentions:
        raise ValueError(tr("attentions must be a non-empty list of per-layer weights (H, T, T), got {value}",
                            value=type(attentions).__name__ if not isinstance(attentions, Sequence) else "[]"))
    first = attentions[0]
    for layer, a in enumerate(attentions):
        if not isinstance(a, Tensor) or a.dim() != 3 or a.shape[-1] != a.shape[-2] or a.shape[-1] != first.shape[-1]:
            raise ValueError(tr("attentions[{layer}] must have shape (H, T, T) with the T of layer 0 ({t}), got "
                                "{shape}", layer=layer, t=first.shape[-1],
                                shape=tuple(a.shape) if isinstance(a, Tensor) else type(a).__name__))
    return [a.detach().to(device="cpu", dtype=torch.float64) for a in attentions]


def residual_attention(weights: Tensor) -> Tensor:
    """One layer's weights ``(H, T, T)`` -> ``(T, T)``: the heads' mean, half and half with the identity, each row
    renormalised to sum to 1 (the paper's code does, for rows that attention left short of 1)."""
    mixed = 0.5 * weights.mean(dim=0) + 0.5 * torch.eye(weights.shape[-1], dtype=weights.dtype)
    return mixed / mixed.sum(dim=-1, keepdim=True)


def rollout(attentions: Sequence[Tensor]) -> Tensor:
    """Attention rollout of per-layer weights ``(H, T, T)`` (first layer first) -> ``(T, T)`` float64.

    Example:
        >>> a = torch.tensor([[[1.0, 0.0], [1.0, 0.0]]])       # one head: both tokens look at token 0
        >>> rollout([a, a])                                    # token 1 keeps 1/4 of itself after two layers
        tensor([[1.0000, 0.0000],
                [0.7500, 0.2500]], dtype=torch.float64)
    """
    layers = [residual_attention(a) for a in check_attentions(attentions)]
    result = layers[0]
    for a in layers[1:]:
        result = a @ result  # the upper layer mixes what the lower ones already mixed
    return result
