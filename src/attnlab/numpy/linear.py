"""``y = x Wᵀ + b``: ``torch.nn.Linear``'s convention, weight ``(out, in)``."""

from __future__ import annotations

import numpy as np

from attnlab.numpy.weights import Params, require


def linear(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """``(..., in)`` -> ``(..., out)`` with ``weight (out, in)`` and optional ``bias (out,)``."""
    if x.shape[-1] != weight.shape[-1]:
        raise ValueError(f"linear: x has width {x.shape[-1]} but weight expects {weight.shape[-1]} (weight "
                         f"{weight.shape})")
    y = x @ weight.T
    if bias is not None:
        y += bias
    return y


def linear_from(params: Params, name: str, x: np.ndarray, owner: str) -> np.ndarray:
    """Apply the ``nn.Linear`` stored as ``name.weight`` / ``name.bias`` (bias optional) in ``params``."""
    return linear(x, require(params, f"{name}.weight", owner), params.get(f"{name}.bias"))
