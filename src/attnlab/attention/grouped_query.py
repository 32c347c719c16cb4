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

Two options complete the attention of today's decoders:

* ``rotary``: rotary position embedding (RoPE), applied to the queries and keys after the projection and
  before the scores, at each token's position (:class:`attnlab.layers.RotaryEmbedding`);
* ``sliding_window``: each query sees only the last ``sliding_window`` positions, its own included (Mistral 7B;
  :func:`attnlab.functional.sliding_window_mask`).

And those of the newest ones, each an option of this one module:

* ``qk_norm``: an RMSNorm on the queries and keys before RoPE, so that their dot products cannot grow without
  bound in training: ``"head"`` normalises each head's vector (Qwen3, Gemma 3), ``"projection"`` the whole query
  and key projections (OLMo 2). The norms are built by ``make_norm(width)`` and named ``q_norm``, ``k_norm``.
* ``softcap``: scores ``cap · tanh(s / cap)`` (Gemma 2), and ``sinks``: one learned logit per head joining the
  softmax (gpt-oss), both in :mod:`attnlab.functional.logit_options`;
* ``scale``: the scores' factor, when it is not ``1/√head_dim`` (Gemma's ``query_pre_attn_scalar``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch
from torch import Tensor, nn

from attnlab.arguments import check_positive_int
from attnlab.attention.cache import LayerCache
from attnlab.attention.checks import as_batched, check_length, check_module_options, mask_heads, one_mask, unbatch
from attnlab.attention.fused import fused_map
from attnlab.functional import Backend, and_masks, attend, sliding_window_mask
from attnlab.functional.backends import KERNELS
from attnlab.functional.linear import Linear
from attnlab.functional.logit_options import check_softcap

#: where ``qk_norm`` normalises: each head's vector, or the whole projection
QK_NORMS = ("head", "projection")


class RotaryLike(Protocol):
    """What the module needs from a rotary embedding (:class:`attnlab.layers.RotaryEmbedding` is one)."""

    head_dim: int

    def apply(self, q: Tensor, k: Tensor, positions: Tensor) -> tuple[Tensor, Tensor]: ...


class GroupedQueryAttention(nn.Module):
    """Causal self-attention with ``num_heads`` query heads over ``num_kv_heads`` key/value heads.

    ``GroupedQueryAttention(d_in, d_out, context_length, dropout, num_heads, qkv_bias, *, num_kv_heads, ...)``:
    the book's positional arguments, as :class:`~attnlab.attention.MultiHeadAttention` takes them.

    Args:
        d_in: input width.
        d_out: output width (of ``out_proj``).
        context_length: the longest sequence accepted, cache included (None: no limit).
        dropout: dropout on the attention weights, training mode only.
        num_heads: query heads.
        qkv_bias: biases on the query/key/value projections (Qwen2 has them; Llama and Mistral do not).
        num_kv_heads: key/value heads; must divide ``num_heads`` (None: ``num_heads``, plain MHA).
        head_dim: width of one head (None: ``d_out // num_heads``). The queries are ``num_heads · head_dim``
            wide, the keys and values ``num_kv_heads · head_dim``.
        rotary: rotate queries and keys by their positions (RoPE); None: no positions here.
        sliding_window: each query sees the last ``sliding_window`` positions, its own included (None: all).
        is_causal: mask future keys (every decoder; False only to look at the unmasked scores).
        out_bias: a bias on ``out_proj`` (Llama, Qwen2 and Mistral have none).
        backend: attention backend, see :func:`attnlab.functional.scaled_dot_product_attention`.
        qk_norm: None, ``"head"`` (a norm of width head_dim on every head: Qwen3, Gemma 3) or ``"projection"`` (of
            the whole query and key projections: OLMo 2), applied before RoPE; needs ``make_norm``.
        make_norm: ``width -> module`` building the q and k norms (an RMSNorm, from the model).
        softcap: scores ``softcap · tanh(s / softcap)`` (Gemma 2: 50); None: as they are.
        sinks: a learned logit per query head (``sinks``, initialised at 0) joins every softmax (gpt-oss).
        scale: the scores' factor (None: ``1/√head_dim``; Gemma: ``query_pre_attn_scalar ** -0.5``).

    Submodules: ``W_query``, ``W_key``, ``W_value`` and ``out_proj`` (the names of
    :class:`~attnlab.attention.MultiHeadAttention`, so :func:`attnlab.inspect.capture` finds them); ``q_norm`` and
    ``k_norm`` with ``qk_norm``.

    Shapes: x ``(B, T, d_in)`` or ``(T, d_in)`` -> ``(B, T, d_out)``; weights ``(B, num_heads, T, L)`` with ``L``
    the keys attended (T, or the cache's length).

    Example:
        >>> gqa = GroupedQueryAttention(64, 64, num_heads=8, num_kv_heads=2)
        >>> gqa.W_key.weight.shape                               # 2 key heads of width 8
        torch.Size([16, 64])
        >>> gqa(torch.rand(2, 5, 64)).shape
        torch.Size([2, 5, 64])
    """

    def __init__(self, d_in: int, d_out: int, context_length: int | None = None, dropout: float = 0.0,
                 num_heads: int = 1, qkv_bias: bool = False, *, num_kv_heads: int | None = None,
                 head_dim: int | None = None, rotary: RotaryLike | None = None, sliding_window: int | None = None,
                 is_causal: bool = True, out_bias: bool = False, backend: Backend = "auto",
                 qk_norm: str | None = None, make_norm: Callable[[int], nn.Module] | None = None,
                 softcap: float | None = None, sinks: bool = False, scale: float | None = None) -> None:
        super().__init__()
        owner = type(self).__name__
        for name, n in (("d_in", d_in), ("d_out", d_out), ("num_heads", num_heads)):
            check_positive_int(owner, name, n)
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        check_positive_int(owner, "num_kv_heads", num_kv_heads)
        if num_heads % num_kv_heads:
            raise ValueError(f"{owner}: num_heads must be divisible by num_kv_heads (each key/value head serves a "
                             f"whole group of query heads), got num_heads={num_heads}, num_kv_heads={num_kv_heads}")
        if head_dim is None:
            if d_out % num_heads:
                raise ValueError(f"{owner}: d_out must be divisible by num_heads (or give head_dim), got "
                                 f"d_out={d_out}, num_heads={num_heads}")
            head_dim = d_out // num_heads
        check_positive_int(owner, "head_dim", head_dim)
        if sliding_window is not None and (isinstance(sliding_window, bool) or not isinstance(sliding_window, int)
                                           or sliding_window < 1):
            raise ValueError(f"{owner}: sliding_window must be None or an int >= 1 (keys seen, own included), got "
                             f"{sliding_window!r}")
        if rotary is not None and getattr(rotary, "head_dim", None) != head_dim:
            raise ValueError(f"{owner}: rotary must rotate heads of width head_dim={head_dim}, got one for "
                             f"head_dim={getattr(rotary, 'head_dim', None)!r}")
        check_module_options(owner, backend, dropout)
        self._check_options(qk_norm, make_norm, softcap, scale, backend)
        self.d_in, self.d_out, self.num_heads, self.num_kv_heads = d_in, d_out, num_heads, num_kv_heads
        self.head_dim, self.context_length, self.is_causal, self.backend = head_dim, context_length, is_causal, backend
        self.rotary, self.sliding_window = rotary, sliding_window
        self.W_query = nn.Linear(d_in, num_heads * head_dim, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, num_kv_heads * head_dim, bias=qkv_bias)    # num_kv_heads only: the cache
        self.W_value = nn.Linear(d_in, num_kv_heads * head_dim, bias=qkv_bias)  # holds these, nothing more
        self.out_proj = Linear(num_heads * head_dim, d_out, bias=out_bias)
        self.dropout = nn.Dropout(dropout)
        self.qk_norm, self.softcap, self.scale = qk_norm, softcap, scale
        if qk_norm is not None:
            per_head = qk_norm == "head"
            self.q_norm = make_norm(head_dim if per_head else num_heads * head_dim)
            self.k_norm = make_norm(head_dim if per_head else num_kv_heads * head_dim)
        self.sinks = nn.Parameter(torch.zeros(num_heads)) if sinks else None

    def _check_options(self, qk_norm: str | None, make_norm: Callable[[int], nn.Module] | None,
                       softcap: float | None, scale: float | None, backend: str) -> None:
        owner = type(self).__name__
        if qk_norm is not None and qk_norm not in QK_NORMS:
            raise ValueError(f"{owner}: qk_norm must be None, 'head' or 'projection', got {qk_norm!r}")
        if qk_norm is not None and make_norm is None:
            raise ValueError(f"{owner}: qk_norm={qk_norm!r} needs make_norm, the norm's builder (width -> module)")
        check_softcap(softcap, f"{owner}: softcap")
        if softcap is not None and backend != "auto" and not KERNELS[backend].softcap:
            raise ValueError(f"{owner}: backend={backend!r} cannot soft-cap the scores (softcap={softcap}); use "
                             f"one of {[name for name, k in KERNELS.items() if k.softcap]} or 'auto'")
        if scale is not None and (isinstance(scale, bool) or not isinstance(scale, int | float) or not scale > 0):
            raise ValueError(f"{owner}: scale must be None or a number > 0, got {scale!r}")

    @property
    def group_size(self) -> int:
        """Query heads per key/value head."""
        return self.num_heads // self.num_kv_heads

    def split_heads(self, t: Tensor, heads: int) -> Tensor:
        """``(B, T, heads · head_dim)`` -> ``(B, heads, T, head_dim)``; under tensor parallelism ``heads / tp`` of
        them, this process' whole heads (counted from ``t``'s width)."""
        b, n, _ = t.shape
        return t.view(b, n, -1, self.head_dim).transpose(1, 2)

    def project(self, x: Tensor, positions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Queries ``(B, num_heads, T, head_dim)``, keys and values ``(B, num_kv_heads, T, head_dim)`` of
        ``x (B, T, d_in)``, the queries and keys rotated to ``positions`` ``(T,)`` or ``(B, T)`` if RoPE is on."""
        fused = fused_map(self, self.W_query, self.W_key, self.W_value)  # inference: one matmul, weights kept
        if fused is None:
            queries, keys, values = self.W_query(x), self.W_key(x), self.W_value(x)
        else:
            q_width, kv_width = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
            queries, keys, values = fused(x).split((q_width, kv_width, kv_width), dim=-1)
        if self.qk_norm == "projection":
            queries, keys = self.q_norm(queries), self.k_norm(keys)
        queries = self.split_heads(queries, self.num_heads)
        keys = self.split_heads(keys, self.num_kv_heads)
        values = self.split_heads(values, self.num_kv_heads)
        if self.qk_norm == "head":  # (B, H, T, head_dim): each head's vector
            queries, keys = self.q_norm(queries), self.k_norm(keys)
        if self.rotary is not None:
            queries, keys = self.rotary.apply(queries, keys, positions)
        return queries, keys, values

    def scored_heads(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """For one sequence ``x (T, d_in)`` at positions 0..T−1: queries, keys and values ``(num_heads, T,
        head_dim)`` as the scores see them, rotated, each key/value head repeated for the query heads it serves.

        What :func:`attnlab.inspect.capture` records, so that the arithmetic it explains is the model's.
        """
        q, k, v = self.project(x[None], torch.arange(x.shape[0], device=x.device))
        return q[0], k[0].repeat_interleave(self.group_size, 0), v[0].repeat_interleave(self.group_size, 0)

    def mask_for(self, mask: Tensor | None, t: int, device: torch.device) -> tuple[Tensor | None, bool]:
        """The mask and ``is_causal`` to attend with over a whole sequence of ``t`` tokens: ``mask`` (padding, or
        None) with the causal structure and the window (with a cache, the cache says which keys each query sees)."""
        if not self.is_causal:
            return mask, False
        if self.sliding_window is not None and self.sliding_window < t:  # a window as wide as t cuts nothing
            return and_masks(mask, sliding_window_mask(t, t, self.sliding_window, device)), False
        return mask, True  # the fused kernels' own causal mask

    def forward(self, x: Tensor, *, attention_mask: Tensor | None = None, attn_mask: Tensor | None = None,
                positions: Tensor | None = None, return_weights: bool = False,
                kv_cache: LayerCache | None = None, head_mask: Tensor | None = None):
        """Attend from each token of ``x`` to itself and the tokens before it (see the class docstring for shapes).

        Args:
            x: ``(B, T, d_in)``.
            attention_mask: ``(B, T)`` padding mask, 1 = real token (checked here); not with ``kv_cache``.
            attn_mask: instead, a model's checked mask broadcastable to ``(B, H, T, L)`` over all ``L`` keys
                (cache included), typically the key padding ``(B, 1, 1, L)``; the causal structure and the
                window are added here.
            positions: ``(T,)`` or ``(B, T)`` positions for RoPE (default: ``0..T−1``, after what the cache holds);
                a model passes them for left-padded batches, where each row's first real token is position 0.
            return_weights: also return the weights ``(B, num_heads, T, L)``.
            kv_cache: decoding: one layer of a cache of ``num_kv_heads`` heads; this call's keys and values
                are appended to it and the queries attend to all of them.
            head_mask: ``(num_heads,)`` per query head: its context times its entry before the merge (0 removes it).
        """
        owner = type(self).__name__
        x, unbatched = as_batched(x, self.d_in, owner)
        b, t, _ = x.shape
        if kv_cache is not None and attention_mask is not None:
            raise ValueError(f"{owner}: a (B, T) attention_mask cannot be combined with kv_cache; pass attn_mask over "
                             "all the cached keys instead")
        mask = one_mask(attention_mask, attn_mask, x, owner)
        if positions is None:
            positions = torch.arange(t, device=x.device) if kv_cache is None else kv_cache.positions(t)

        # 1. project and split: num_heads query heads, num_kv_heads key/value heads; rotate q and k (RoPE)
        queries, keys, values = self.project(x, positions)
        if kv_cache is None:
            mask, is_causal = self.mask_for(mask, t, x.device)
        else:  # decoding: the cache keeps the num_kv_heads heads (never a copy per query head) and says which of
            keys, values = kv_cache.update(keys, values)  # them each new query sees: causal, within the window
            mask = kv_cache.select_keys(mask)  # the padding of the keys it returned (a rolling cache keeps a few)
            mask, is_causal = and_masks(mask, kv_cache.attn_mask(t, self.is_causal, self.sliding_window)), False
        check_length(keys.shape[-2], self.context_length, owner)

        # 2. scores, causal (and window) mask, softmax, weighted sum; query head h reads key/value head h // group
        context, weights = attend(queries, keys, values, attn_mask=mask, is_causal=is_causal,
                                  dropout_p=self.dropout.p if self.training else 0.0, scale=self.scale,
                                  enable_gqa=self.num_kv_heads != self.num_heads, backend=self.backend,
                                  return_weights=return_weights, softcap=self.softcap, sinks=self.sinks)

        # 3. merge the heads and mix them                                                   (B, T, d_out)
        context = mask_heads(context, head_mask, owner).transpose(1, 2).reshape(b, t, -1)
        return unbatch(self.out_proj(context), weights, unbatched, return_weights)

    def extra_repr(self) -> str:
        options = (("qk_norm", self.qk_norm), ("softcap", self.softcap), ("sinks", self.sinks is not None),
                   ("scale", self.scale))
        extra = "".join(f", {name}={value}" for name, value in options if value)
        return (f"num_heads={self.num_heads}, num_kv_heads={self.num_kv_heads}, head_dim={self.head_dim}, "
                f"rotary={self.rotary is not None}, sliding_window={self.sliding_window}{extra}")
