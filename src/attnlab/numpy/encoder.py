"""The whole BERT-style encoder forward in NumPy, the twin of :class:`attnlab.models.TransformerEncoder`:

    input_ids (B, T) -> LayerNorm(token + position + token-type embeddings)
                     -> N post-LN blocks (bidirectional, padding masked) -> last_hidden_state (B, T, D)

It reads a converted ``state_dict`` (:func:`attnlab.numpy.state_dict_to_arrays`) by the torch
model's names: ``embeddings.*`` and ``blocks.{i}.*``.
"""

from __future__ import annotations

import re

import numpy as np

from attnlab.numpy.block import transformer_block
from attnlab.numpy.layernorm import layer_norm
from attnlab.numpy.weights import Params, require, subtree

_OWNER = "encoder_forward"


def _ids(name: str, ids: np.ndarray, shape: tuple[int, ...] | None, upper: int) -> np.ndarray:
    if not isinstance(ids, np.ndarray) or not np.issubdtype(ids.dtype, np.integer):
        got = ids.dtype if isinstance(ids, np.ndarray) else type(ids).__name__
        raise TypeError(f"{_OWNER}: {name} must be an integer numpy.ndarray, got {got}")
    if ids.ndim != 2 or (shape is not None and ids.shape != shape):
        want = "shape (B, T)" if shape is None else f"the shape of input_ids {shape}"
        raise ValueError(f"{_OWNER}: {name} must have {want}, got {ids.shape}")
    if ids.size and (ids.min() < 0 or ids.max() >= upper):
        raise ValueError(f"{_OWNER}: {name} must lie in [0, {upper}), got values in [{ids.min()}, {ids.max()}]")
    return ids


def num_layers(params: Params) -> int:
    """How many ``blocks.{i}`` the parameters hold."""
    found = {int(m.group(1)) for name in params if (m := re.match(r"blocks\.(\d+)\.", name))}
    return max(found) + 1 if found else 0


def embeddings(input_ids: np.ndarray, params: Params, token_type_ids: np.ndarray | None = None,
               eps: float = 1e-12) -> np.ndarray:
    """``input_ids (B, T)`` -> LayerNorm(token + position + token type) ``(B, T, D)``."""
    p = subtree(params, "embeddings")
    words, positions = require(p, "word_embeddings.weight", _OWNER), require(p, "position_embeddings.weight", _OWNER)
    _ids("input_ids", input_ids, None, words.shape[0])
    if input_ids.shape[1] > positions.shape[0]:
        raise ValueError(f"{_OWNER}: {input_ids.shape[1]} tokens exceed the model's {positions.shape[0]} positions")
    x = words[input_ids] + positions[: input_ids.shape[1]]
    types = p.get("token_type_embeddings.weight")
    if types is not None:
        x += types[0] if token_type_ids is None else types[_ids("token_type_ids", token_type_ids, input_ids.shape,
                                                                  types.shape[0])]
    return layer_norm(x, p.get("ln.weight"), p.get("ln.bias"), eps)


def encoder_forward(
    input_ids: np.ndarray,
    params: Params,
    num_heads: int,
    attention_mask: np.ndarray | None = None,
    token_type_ids: np.ndarray | None = None,
    *,
    eps: float = 1e-12,
    activation: str = "gelu",
) -> np.ndarray:
    """``last_hidden_state (B, T, D)`` of a BERT-style encoder.

    Args:
        input_ids: ``(B, T)`` integer token ids.
        params: the converted ``state_dict`` of a ``TransformerEncoder``.
        num_heads: attention heads per block (the model's ``config.num_heads``).
        attention_mask: ``(B, T)``, 1 for real tokens, 0 for padding (None: all real).
        token_type_ids: ``(B, T)`` segment ids (None: all 0).
        eps: LayerNorm epsilon (``config.layer_norm_eps``; BERT: 1e-12).
        activation: the feed-forward non-linearity (``config.activation``).

    The attention runs ``"auto"``: the in-place math path, or over long inputs the chunked one (O(T) memory).
    """
    if attention_mask is not None:
        _ids("attention_mask", attention_mask, input_ids.shape if isinstance(input_ids, np.ndarray) else None, 2)
    x = embeddings(input_ids, params, token_type_ids, eps)
    n = num_layers(params)
    if n == 0:
        raise KeyError(f"{_OWNER}: no blocks.{{i}} parameters found; got {sorted(params)[:5]}...")
    for i in range(n):
        x = transformer_block(x, subtree(params, f"blocks.{i}"), num_heads, attention_mask, norm="post",
                              is_causal=False,
                              activation=activation, eps=eps)
    return x
