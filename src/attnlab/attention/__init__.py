"""The attention mechanisms as ``nn.Module``s, in the order the texts teach them."""

from attnlab.attention.causal import CausalAttention
from attnlab.attention.grouped_query import GroupedQueryAttention
from attnlab.attention.multihead import MultiHeadAttention, MultiHeadAttentionWrapper
from attnlab.attention.self_attention import SelfAttentionV1, SelfAttentionV2
from attnlab.attention.simple import SimpleSelfAttention

__all__ = [
    "CausalAttention",
    "GroupedQueryAttention",
    "MultiHeadAttention",
    "MultiHeadAttentionWrapper",
    "SelfAttentionV1",
    "SelfAttentionV2",
    "SimpleSelfAttention",
]
