"""Grouped-query attention (Ainslie et al., 2023, "GQA", arXiv:2305.13245), as Llama, Qwen and Mistral use it.

Multi-head attention gives every query head its own key and value head. Decoding keeps all of those keys and
values in a cache, and reading that cache, not the arithmetic, is what limits the speed of each new token. GQA
lets a *group* of query heads share one key/value head:

    num_heads query heads,  num_kv_heads key/value heads,  group = num_heads / num_kv_heads
    query head h reads key/value head  h // group

* ``num_kv_heads == num_heads``: one query head per key/value head, plain multi-head attention (MHA);
* ``num_kv_heads == 1``: every query head reads the same keys and values, multi-query attention (MQA;
  Shazeer, 2019, arXiv:1911.02150);
* between the two: GQA. Llama-3.2-1B has 32 query heads over 8 key/value heads: a 4× smaller cache.

The key and value projections shrink to ``num_kv_heads · head_dim`` outputs, and the KV cache holds only those
heads. The keys are never copied per query head here: :func:`attnlab.functional.attend` is called with
``enable_gqa=True`` (torch's semantics), and each backend reads the shared heads its own way.

It is :class:`~attnlab.attention.MultiHeadAttention` itself, built from an
:class:`~attnlab.attention.spec.AttentionSpec` with ``num_kv_heads`` below ``num_heads``: one module does the
projections, the masks, the cache and the kernel call for every kind. Two options complete the attention of
today's decoders:

* ``rotary``: rotary position embedding (RoPE), applied to the queries and keys after the projection and
  before the scores, at each token's position (:class:`attnlab.layers.RotaryEmbedding`, given beside the spec);
* ``sliding_window``: each query sees only the last ``sliding_window`` positions, its own included (Mistral 7B;
  :func:`attnlab.functional.sliding_window_mask`).

And those of the newest ones, each a field of the spec:

* ``qk_norm``: an RMSNorm on the queries and keys before RoPE, so that their dot products cannot grow without
  bound in training: ``"head"`` normalises each head's vector (Qwen3, Gemma 3), ``"projection"`` the whole query
  and key projections (OLMo 2). The norms are built by ``make_norm(width)`` and named ``q_norm``, ``k_norm``.
* ``softcap``: scores ``cap · tanh(s / cap)`` (Gemma 2), and ``sinks``: one learned logit per head joining the
  softmax (gpt-oss), both in :mod:`attnlab.functional.logit_options`;
* ``scale``: the scores' factor, when it is not ``1/√head_dim`` (Gemma's ``query_pre_attn_scalar``).
"""

from __future__ import annotations

from torch import nn

from attnlab.attention.multihead import MultiHeadAttention, RotaryLike
from attnlab.attention.spec import QK_NORMS, AttentionSpec

__all__ = ["QK_NORMS", "GroupedQueryAttention", "RotaryLike"]


class GroupedQueryAttention(MultiHeadAttention):
    """Causal self-attention with ``num_heads`` query heads over ``num_kv_heads`` key/value heads:
    ``GroupedQueryAttention(spec, rotary=None)``, everything else in the :class:`AttentionSpec`.

    Submodules: ``W_query``, ``W_key``, ``W_value`` and ``out_proj`` (the names of
    :class:`~attnlab.attention.MultiHeadAttention`); ``q_norm`` and ``k_norm`` with ``qk_norm``.

    Shapes: x ``(B, T, d_in)`` or ``(T, d_in)`` -> ``(B, T, d_out)``; weights ``(B, num_heads, T, L)`` with ``L``
    the keys attended (T, or the cache's length).

    Example:
        >>> import torch
        >>> gqa = GroupedQueryAttention(AttentionSpec(64, 64, num_heads=8, num_kv_heads=2, out_bias=False))
        >>> gqa.W_key.weight.shape                               # 2 key heads of width 8
        torch.Size([16, 64])
        >>> gqa(torch.rand(2, 5, 64)).shape
        torch.Size([2, 5, 64])
    """

    def __init__(self, spec: AttentionSpec, rotary: RotaryLike | None = None) -> None:
        nn.Module.__init__(self)
        if not isinstance(spec, AttentionSpec):
            raise TypeError(f"GroupedQueryAttention: spec must be an AttentionSpec, got {type(spec).__name__}")
        self.build(spec, rotary)
