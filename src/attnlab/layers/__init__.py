"""The layers around attention: positions, normalisation, the feed-forward network, the block."""

from attnlab.layers.block import TransformerBlock
from attnlab.layers.decoder_block import DecoderBlock
from attnlab.layers.feedforward import FeedForward
from attnlab.layers.layernorm import LayerNorm
from attnlab.layers.modern_block import ModernBlock
from attnlab.layers.packed import PackedLinear, onednn_available, pack_linears
from attnlab.layers.positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding, sinusoidal_table
from attnlab.layers.rmsnorm import RMSNorm
from attnlab.layers.rotary import RopeScaling, RotaryEmbedding, apply_rotary
from attnlab.layers.swiglu import SwiGLU

__all__ = [
    "DecoderBlock",
    "FeedForward",
    "LayerNorm",
    "LearnedPositionalEmbedding",
    "ModernBlock",
    "PackedLinear",
    "RMSNorm",
    "RopeScaling",
    "RotaryEmbedding",
    "SinusoidalPositionalEncoding",
    "SwiGLU",
    "TransformerBlock",
    "apply_rotary",
    "onednn_available",
    "pack_linears",
    "sinusoidal_table",
]
