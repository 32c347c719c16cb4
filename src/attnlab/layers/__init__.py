"""The layers around attention: positions, normalisation, the feed-forward network, the block."""

from attnlab.layers.block import TransformerBlock
from attnlab.layers.feedforward import FeedForward
from attnlab.layers.layernorm import LayerNorm
from attnlab.layers.packed import PackedLinear, onednn_available, pack_linears
from attnlab.layers.positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding, sinusoidal_table

__all__ = [
    "FeedForward",
    "LayerNorm",
    "LearnedPositionalEmbedding",
    "PackedLinear",
    "SinusoidalPositionalEncoding",
    "TransformerBlock",
    "onednn_available",
    "pack_linears",
    "sinusoidal_table",
]
