"""Layer normalisation (Ba et al., 2016), the twin of :class:`attnlab.layers.LayerNorm`:

    LayerNorm(x) = γ · (x − μ) / √(σ² + ε) + β

with μ and the *biased* σ² (divide by D) over the last dim, as ``torch.nn.LayerNorm`` does.
"""

from __future__ import annotations

import numpy as np

from attnlab.numpy.checks import check_float_array


def layer_norm(x: np.ndarray, weight: np.ndarray | None = None, bias: np.ndarray | None = None,
               eps: float = 1e-5) -> np.ndarray:
    """Normalise each vector over its last dim: ``(..., D)`` -> ``(..., D)``; ``weight``/``bias`` are ``(D,)``."""
    check_float_array(x, "x", "layer_norm")
    if not isinstance(eps, int | float) or isinstance(eps, bool) or not eps > 0:
        raise ValueError(f"layer_norm: eps must be a float > 0, got {eps!r}")
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and p.shape != x.shape[-1:]:
            raise ValueError(f"layer_norm: {name} must have shape ({x.shape[-1]},), got {p.shape}")
    centred = x - x.mean(axis=-1, keepdims=True)
    var = np.mean(np.square(centred), axis=-1, keepdims=True)  # biased: divide by D
    out = centred / np.sqrt(var + x.dtype.type(eps))
    if weight is not None:
        out *= weight
    if bias is not None:
        out += bias
    return out
