"""The layers around attention: positions, normalisation, the feed-forward network, the block."""

from attnlab.layers.block import BlockSpec, TransformerBlock
from attnlab.layers.decoder_block import DecoderBlock
from attnlab.layers.feedforward import FeedForward
from attnlab.layers.layernorm import LayerNorm
from attnlab.layers.modern_block import ModernBlock, ModernBlockSpec
from attnlab.layers.moe import MixtureOfExperts, MoESpec, moe_layers
from attnlab.layers.positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding, sinusoidal_table
from attnlab.layers.rmsnorm import RMSNorm
from attnlab.layers.rotary import RopeScaling, RotaryEmbedding, apply_rotary
from attnlab.layers.swiglu import SwiGLU

__all__ = [
    "BlockSpec",
    "DecoderBlock",
    "FeedForward",
    "LayerNorm",
    "LearnedPositionalEmbedding",
    "MixtureOfExperts",
    "MoESpec",
    "ModernBlock",
    "ModernBlockSpec",
    "RMSNorm",
    "RopeScaling",
    "RotaryEmbedding",
    "SinusoidalPositionalEncoding",
    "SwiGLU",
    "TransformerBlock",
    "apply_rotary",
    "moe_layers",
    "sinusoidal_table",
]
