"""The attention mechanisms as ``nn.Module``s, in the order the texts teach them."""

from attnlab.attention.causal import CausalAttention
from attnlab.attention.grouped_query import GroupedQueryAttention
from attnlab.attention.latent import LatentAttention, LatentAttentionSpec
from attnlab.attention.multihead import MultiHeadAttention, MultiHeadAttentionWrapper
from attnlab.attention.self_attention import SelfAttentionV1, SelfAttentionV2
from attnlab.attention.simple import SimpleSelfAttention
from attnlab.attention.sparse import LightningIndexer, SparseAttentionSpec, SparseLatentAttention
from attnlab.attention.spec import AttentionSpec

__all__ = [
    "AttentionSpec",
    "CausalAttention",
    "GroupedQueryAttention",
    "LatentAttention",
    "LatentAttentionSpec",
    "LightningIndexer",
    "MultiHeadAttention",
    "MultiHeadAttentionWrapper",
    "SelfAttentionV1",
    "SelfAttentionV2",
    "SimpleSelfAttention",
    "SparseAttentionSpec",
    "SparseLatentAttention",
]
