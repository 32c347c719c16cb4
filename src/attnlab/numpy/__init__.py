"""The forward pass in NumPy alone: attnlab's twin that imports and runs without torch.

Same argument names and mask conventions as :mod:`attnlab.functional` (bool mask True = may
attend; float mask added; ``is_causal`` top-left aligned; a query with nothing to attend to gets
0). Weights come from a torch ``state_dict`` through one converter, :func:`state_dict_to_arrays`.

>>> import numpy as np
>>> from attnlab import numpy as anp
>>> q = k = v = np.ones((1, 2, 5, 8), dtype=np.float32)               # (B, H, T, D)
>>> out, w = anp.scaled_dot_product_attention(q, k, v, is_causal=True, return_weights=True)
>>> w.sum(-1).round(4).tolist()
[[[1.0, 1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0, 1.0]]]
"""

from attnlab.numpy.block import transformer_block
from attnlab.numpy.checks import BACKENDS, Backend
from attnlab.numpy.chunked import chunked_attention
from attnlab.numpy.encoder import embeddings, encoder_forward
from attnlab.numpy.feedforward import erf, feed_forward, gelu, gelu_tanh
from attnlab.numpy.layernorm import layer_norm
from attnlab.numpy.linear import linear
from attnlab.numpy.masks import causal_mask, padding_mask
from attnlab.numpy.math_attention import attention_scores, attention_weights, math_attention
from attnlab.numpy.multihead import multi_head_attention, split_heads
from attnlab.numpy.positional import add_sinusoidal_positions, sinusoidal_table
from attnlab.numpy.sdpa import choose_backend, scaled_dot_product_attention
from attnlab.numpy.softmax import softmax
from attnlab.numpy.weights import load_safetensors, state_dict_to_arrays, subtree

__all__ = [
    "BACKENDS",
    "Backend",
    "add_sinusoidal_positions",
    "attention_scores",
    "attention_weights",
    "causal_mask",
    "choose_backend",
    "chunked_attention",
    "embeddings",
    "encoder_forward",
    "erf",
    "feed_forward",
    "gelu",
    "gelu_tanh",
    "layer_norm",
    "linear",
    "load_safetensors",
    "math_attention",
    "multi_head_attention",
    "padding_mask",
    "scaled_dot_product_attention",
    "sinusoidal_table",
    "softmax",
    "split_heads",
    "state_dict_to_arrays",
    "subtree",
    "transformer_block",
]
