"""The Transformer block in NumPy, the twin of :class:`attnlab.layers.TransformerBlock`:

* post-LN (the original Transformer, BERT):  x = LN(x + Attn(x));   x = LN(x + FFN(x))
* pre-LN  (GPT-2):                            x = x + Attn(LN(x));   x = x + FFN(LN(x))

Parameters by the torch block's names: ``attn.*``, ``ln1.*`` (around attention), ``ff.*``, ``ln2.*``.
"""

from __future__ import annotations

from typing import Literal, overload

import numpy as np

from attnlab.numpy.feedforward import feed_forward
from attnlab.numpy.layernorm import layer_norm
from attnlab.numpy.multihead import multi_head_attention
from attnlab.numpy.weights import Params, subtree


def _ln(params: Params, name: str, x: np.ndarray, eps: float) -> np.ndarray:
    return layer_norm(x, params.get(f"{name}.weight"), params.get(f"{name}.bias"), eps)


@overload
def transformer_block(x: np.ndarray, params: Params, num_heads: int, attention_mask: np.ndarray | None = None, *,
                      norm: str = "pre", is_causal: bool = False, activation: str = "gelu", eps: float = 1e-5,
                      return_weights: Literal[False] = False) -> np.ndarray: ...
@overload
def transformer_block(x: np.ndarray, params: Params, num_heads: int, attention_mask: np.ndarray | None = None, *,
                      norm: str = "pre", is_causal: bool = False, activation: str = "gelu", eps: float = 1e-5,
                      return_weights: Literal[True]) -> tuple[np.ndarray, np.ndarray]: ...
@overload
def transformer_block(x: np.ndarray, params: Params, num_heads: int, attention_mask: np.ndarray | None = None, *,
                      norm: str = "pre", is_causal: bool = False, activation: str = "gelu", eps: float = 1e-5,
                      return_weights: bool = False) -> np.ndarray | tuple[np.ndarray, np.ndarray]: ...
def transformer_block(
    x: np.ndarray,
    params: Params,
    num_heads: int,
    attention_mask: np.ndarray | None = None,
    *,
    norm: str = "pre",
    is_causal: bool = False,
    activation: str = "gelu",
    eps: float = 1e-5,
    return_weights: bool = False,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """One block: ``(B, T, D)`` -> ``(B, T, D)`` (and weights ``(B, H, T, T)`` with ``return_weights``).

    ``attention_mask (B, T)``: 1 = real token; the other arguments mean what they mean for the torch block.
    """
    if norm not in ("post", "pre"):
        raise ValueError(f"transformer_block: norm must be 'post' or 'pre', got {norm!r}")
    attn, ff = subtree(params, "attn"), subtree(params, "ff")
    h = _ln(params, "ln1", x, eps) if norm == "pre" else x
    result = multi_head_attention(h, attn, num_heads, attention_mask, is_causal=is_causal,
                                  return_weights=return_weights)
    a, weights = result if isinstance(result, tuple) else (result, None)  # a tuple: return_weights
    if norm == "pre":
        x = x + a
        x = x + feed_forward(_ln(params, "ln2", x, eps), ff, activation)
    else:
        x = _ln(params, "ln1", x + a, eps)
        x = _ln(params, "ln2", x + feed_forward(x, ff, activation), eps)
    return x if weights is None else (x, weights)
