"""Multi-head attention (*Build a LLM From Scratch*, §3.6; "Attention Is All You Need", §3.2.2).

Several attention heads look at the same sequence, each through its own projections, and their
context vectors are concatenated:  MultiHead(X) = Concat(head_1, ..., head_h) W_o.

Two ways to build it, proven equal in the tests:

* :class:`MultiHeadAttentionWrapper` stacks ``num_heads`` independent :class:`CausalAttention`
  modules and concatenates their outputs. Easy to read; one small matmul per head.
* :class:`MultiHeadAttention` does one big projection of size ``d_out`` and *splits* it into
  heads with ``view``/``transpose``, so all heads run in one batched kernel, then mixes them with
  ``out_proj``. This is what real models do.

:class:`MultiHeadAttention` is also the one attention module of every attnlab model: self- and cross-attention,
the decoding cache, and the options of today's decoders (grouped key/value heads, RoPE, a window, QK-norm,
soft-capping, sinks), all written down in an :class:`~attnlab.attention.spec.AttentionSpec`.
:class:`~attnlab.attention.GroupedQueryAttention` is the same module, built from a spec.
"""

from __future__ import annotations

from typing import Protocol, overload

import torch
from torch import Tensor, nn

from attnlab.attention.cache import LayerCache
from attnlab.attention.causal import CausalAttention
from attnlab.attention.checks import as_batched, check_length, key_padding, mask_heads, unbatch
from attnlab.attention.spec import AttentionSpec
from attnlab.functional import Backend, and_masks, attend, sliding_window_mask


class MultiHeadAttentionWrapper(nn.Module):
    """``num_heads`` causal heads side by side: ``(B, T, d_in)`` -> ``(B, T, num_heads · d_out)``.

    Weights, when asked for, are stacked per head: ``(B, num_heads, T, T)``.
    """

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int,
                 qkv_bias: bool = False) -> None:
        super().__init__()
        if num_heads < 1:
            raise ValueError(f"MultiHeadAttentionWrapper: num_heads must be >= 1, got {num_heads!r}")
        self.heads = nn.ModuleList(
            CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)
            for _ in range(num_heads)
        )

    def forward(self, x: Tensor, attention_mask: Tensor | None = None, return_weights: bool = False):
        outs = [head(x, attention_mask, return_weights=return_weights) for head in self.heads]
        if not return_weights:
            return torch.cat(outs, dim=-1)
        return torch.cat([o for o, _ in outs], dim=-1), torch.stack([w for _, w in outs], dim=-3)


class RotaryLike(Protocol):
    """What the module needs from a rotary embedding (:class:`attnlab.layers.RotaryEmbedding` is one)."""

    head_dim: int

    def apply(self, q: Tensor, k: Tensor, positions: Tensor) -> tuple[Tensor, Tensor]: ...


class MultiHeadAttention(nn.Module):
    """Multi-head attention with weight splitting and an output projection, called as in the book.

    ``MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads, qkv_bias=False)``: the book's
    positional arguments, in the book's order. Self-attention is ``mha(x)`` (queries, keys and values all
    from ``x``); cross-attention is ``mha(x, memory)`` (queries from ``x``, keys and values from ``memory``).
    Every other option is a field of :class:`~attnlab.attention.spec.AttentionSpec`:
    ``MultiHeadAttention.from_spec(spec, rotary=None)``.

    Args:
        d_in: input width.
        d_out: output width; split into ``num_heads`` heads of ``head_dim = d_out // num_heads``.
        context_length: the longest sequence accepted (None: no limit).
        dropout: dropout on the attention weights, training mode only.
        num_heads: number of heads; must divide ``d_out``.
        qkv_bias: give the q/k/v projections a bias (BERT and GPT-2 do, the book does not).
        is_causal: mask future keys (a decoder, and the book's default); False for an encoder or
            for cross-attention.
        out_bias: give ``out_proj`` a bias (the book and GPT-2 do; ``bias=False`` models do not).
        backend: attention backend, see :func:`attnlab.functional.scaled_dot_product_attention`.
        scale: the scores' factor (None: 1/√head_dim).

    Calling it, ``mha(x, memory=None, *, attention_mask=None, attn_mask=None, positions=None,
    return_weights=False, kv_cache=None, memory_kv=None, head_mask=None)``:
        x: the queries' sequence ``(B, Tq, d_in)`` or ``(Tq, d_in)``.
        memory: the keys' and values' sequence ``(B, Tk, d_in)``; None for self-attention.
        attention_mask: ``(B, Tk)`` padding mask of the keys' sequence, 1 = real token (checked here).
        attn_mask: instead, a mask already broadcastable to the scores ``(B, H, Tq, Tk)`` (bool, True =
            may attend, or float, added), from a model that checked its inputs; used as it is (with a
            ``kv_cache`` it spans every position so far, and the causal mask and the window are added to it).
        positions: ``(T,)`` or ``(B, T)`` positions RoPE turns q and k by (default ``0..T−1`` after what the
            cache holds); a model passes them for a left-padded batch. Unused without ``rotary``.
        return_weights: also return the weights ``(B, H, Tq, Tk)``.
        kv_cache: decoding: one layer of a cache (:class:`~attnlab.attention.cache.LayerCache`); this call's keys
            and values are appended to it and the queries attend to all of them. The T new queries sit at
            positions ``L - T .. L - 1``, so query i may attend keys ``j <= L - T + i`` (bottom-right aligned;
            torch's ``is_causal`` is top-left aligned, hence the cache's own mask).
        memory_kv: cross-attention with the memory's keys and values already projected and split
            (:meth:`project_memory`), instead of ``memory``: what a decoding loop computes once per source.
        head_mask: ``(num_heads,)``: each head's context is multiplied by its entry before the heads are merged
            (0 removes the head, 1 keeps it); differentiable, for head importance.

    Shapes: x ``(B, Tq, d_in)`` or ``(Tq, d_in)``, memory ``(B, Tk, d_in)`` -> ``(B, Tq, d_out)``;
    weights ``(B, num_heads, Tq, Tk)``. In the comments, ``hd`` is ``head_dim``.

    With ``backend="math"`` (or when weights are asked for) step 3 of :meth:`forward` is the book's code::

        attn_scores = queries @ keys.transpose(2, 3)                  # (B, H, Tq, Tk)
        attn_scores.masked_fill_(~mask, -torch.inf)                   # the causal and padding masks
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        context_vec = attn_weights @ values                           # (B, H, Tq, hd)

    (:func:`attnlab.functional.math_attention`); otherwise the same arithmetic runs as one fused kernel.

    Example:
        >>> mha = MultiHeadAttention(3, 2, 6, 0.0, 2)                 # the book's call
        >>> mha(torch.rand(2, 6, 3)).shape
        torch.Size([2, 6, 2])
    """

    def __init__(self, d_in: int, d_out: int, context_length: int | None = None, dropout: float = 0.0,
                 num_heads: int = 1, qkv_bias: bool = False, *, is_causal: bool = True, out_bias: bool = True,
                 backend: Backend = "auto", scale: float | None = None) -> None:
        super().__init__()
        owner = type(self).__name__
        if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1 or d_out % num_heads:
            raise ValueError(f"{owner}: d_out must be divisible by num_heads, got d_out={d_out}, "
                             f"num_heads={num_heads}")
        self.build(AttentionSpec(d_in, d_out, num_heads, context_length=context_length, dropout=dropout,
                                 qkv_bias=qkv_bias, out_bias=out_bias, is_causal=is_causal, scale=scale,
                                 backend=backend, owner=owner))

    @classmethod
    def from_spec(cls, spec: AttentionSpec, rotary: RotaryLike | None = None) -> MultiHeadAttention:
        """The module ``spec`` describes (RoPE by ``rotary``, shared with the model's other layers)."""
        module = cls.__new__(cls)
        nn.Module.__init__(module)
        module.build(spec, rotary)
        return module

    def build(self, spec: AttentionSpec, rotary: RotaryLike | None = None) -> None:
        """Make the projections (and the q/k norms and sinks) ``spec`` asks for."""
        if rotary is not None and getattr(rotary, "head_dim", None) != spec.head_dim:
            raise ValueError(f"{spec.owner}: rotary must rotate heads of width head_dim={spec.head_dim}, got one for "
                             f"head_dim={getattr(rotary, 'head_dim', None)!r}")
        self.spec, self.rotary = spec, rotary
        assert spec.num_kv_heads is not None and spec.head_dim is not None  # AttentionSpec.__post_init__ fills them
        # the spec's fields every call reads, as plain attributes (nn.Module.__getattr__ is slow for the rest)
        self.d_in, self.d_out, self.num_heads, self.num_kv_heads = spec.d_in, spec.d_out, spec.num_heads, \
            spec.num_kv_heads
        self.head_dim, self.context_length, self.is_causal = spec.head_dim, spec.context_length, spec.is_causal
        self.backend, self.scale, self.sliding_window, self.softcap = spec.backend, spec.scale, \
            spec.sliding_window, spec.softcap
        self.qk_norm = spec.qk_norm
        q_width, kv_width = spec.num_heads * spec.head_dim, spec.num_kv_heads * spec.head_dim
        self.W_query = nn.Linear(spec.d_in, q_width, bias=spec.qkv_bias)
        self.W_key = nn.Linear(spec.d_in, kv_width, bias=spec.qkv_bias)    # num_kv_heads only: the cache holds
        self.W_value = nn.Linear(spec.d_in, kv_width, bias=spec.qkv_bias)  # these, nothing more
        self.out_proj = nn.Linear(q_width, spec.d_out, bias=spec.out_bias)  # mixes what the heads found
        self.dropout = nn.Dropout(spec.dropout)
        if spec.qk_norm is not None:
            per_head = spec.qk_norm == "head"
            assert spec.make_norm is not None  # AttentionSpec refuses qk_norm without make_norm
            self.q_norm = spec.make_norm(spec.head_dim if per_head else q_width)
            self.k_norm = spec.make_norm(spec.head_dim if per_head else kv_width)
        self.sinks = nn.Parameter(torch.zeros(spec.num_heads)) if spec.sinks else None
        if spec.output_gate:  # Qwen3-Next's gated attention: σ(W_gate x), one gate per feature of every head
            self.W_gate = nn.Linear(spec.d_in, q_width, bias=spec.qkv_bias)

    @property
    def group_size(self) -> int:
        """Query heads per key/value head."""
        return self.num_heads // self.num_kv_heads

    def forward(self, x: Tensor, memory: Tensor | None = None, *, attention_mask: Tensor | None = None,
                attn_mask: Tensor | None = None, positions: Tensor | None = None, return_weights: bool = False,
                kv_cache: LayerCache | None = None, memory_kv: tuple[Tensor, Tensor] | None = None,
                head_mask: Tensor | None = None):
        """Attend from ``x`` to ``memory`` (default: ``x`` itself); arguments and shapes: the class docstring."""
        owner = type(self).__name__
        x, unbatched = as_batched(x, self.d_in, owner)                             # (B, T, d_in); (T, d_in): B = 1
        b, t, _ = x.shape
        # 1. project: queries from x, keys and values from memory (or x); 2. split into heads (RoPE turns q and k)
        queries, keys, values = self.heads(x, memory, memory_kv, positions, kv_cache)  # (B, H, T, hd), (B, Hkv, Tk, hd)
        mask = attn_mask if attention_mask is None else self.padding(attention_mask, attn_mask, keys, kv_cache)
        # decoding: the cached keys and values come first, (B, Hkv, L, hd); the cache says which each query sees
        keys, values, mask, is_causal = self.visible(keys, values, mask, t, kv_cache)
        # 3. scores Q Kᵀ / √hd, masked, softmax over the keys, dropout, weighted sum of the values
        context, weights = self.attend(queries, keys, values, mask, is_causal, return_weights)  # (B, H, T, hd)
        # 4. merge the heads back into d_out, then mix them
        if head_mask is not None:
            context = mask_heads(context, head_mask, owner)                        # head h times head_mask[h]
        context = context.transpose(1, 2).reshape(b, t, -1)                       # (B, T, H, hd) -> (B, T, H · hd)
        if self.spec.output_gate:  # what each head passes on, gated by the query's own input
            context = context * torch.sigmoid(self.W_gate(x))
        out = self.out_proj(context)                                               # (B, T, d_out)
        return unbatch(out, weights, unbatched, return_weights) if unbatched or return_weights else out

    def project_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Step 1 of self-attention: ``W_query(x)``, ``W_key(x)``, ``W_value(x)``, ``(B, T, ·)`` each."""
        return self.W_query(x), self.W_key(x), self.W_value(x)

    def heads(self, x: Tensor, memory: Tensor | None = None, memory_kv: tuple[Tensor, Tensor] | None = None,
              positions: Tensor | None = None, kv_cache: LayerCache | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """Steps 1 and 2: queries ``(B, H, Tq, hd)`` from ``x (B, Tq, d_in)``, keys and values ``(B, Hkv, Tk, hd)``
        from ``memory`` (default ``x``) or taken from ``memory_kv``; normalised (QK-norm) and rotated to
        ``positions`` (RoPE) where the spec says so."""
        if memory_kv is not None:  # cross-attention while decoding: the memory's heads were made once
            if memory is not None or kv_cache is not None:
                raise ValueError(f"{type(self).__name__}: memory_kv holds the memory's keys and values already; give "
                                 "it without memory and without kv_cache")
            return self.split_heads(self.W_query(x), None, None)[0], *memory_kv
        if memory is None:
            queries, keys, values = self.split_heads(*self.project_qkv(x))
        else:
            memory = as_batched(memory, self.d_in, type(self).__name__, "memory")[0]
            queries, keys, values = self.split_heads(self.W_query(x), self.W_key(memory), self.W_value(memory))
        if self.rotary is not None:
            if positions is None:
                t = x.shape[1]
                positions = torch.arange(t, device=x.device) if kv_cache is None else kv_cache.positions(t)
            queries, keys = self.rotary.apply(queries, keys, positions)
        return queries, keys, values

    @overload
    def split_heads(self, queries: Tensor, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor, Tensor]: ...
    @overload
    def split_heads(self, queries: Tensor, keys: None, values: None) -> tuple[Tensor, None, None]: ...
    @overload
    def split_heads(self, queries: None, keys: Tensor, values: Tensor) -> tuple[None, Tensor, Tensor]: ...
    def split_heads(self, queries: Tensor | None, keys: Tensor | None,
                    values: Tensor | None) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
        """Step 2: ``(B, T, heads · hd)`` -> ``(B, heads, T, hd)`` for each one given, the queries and keys normalised
        where the spec has QK-norm (the whole projection before the split, or each head after it). The heads are
        counted from the widths: queries have ``num_heads``, keys and values ``num_kv_heads``, and under tensor
        parallelism a process holds a whole group of them, ``1/tp`` of the width."""
        if self.qk_norm == "projection":
            queries = None if queries is None else self.q_norm(queries)
            keys = None if keys is None else self.k_norm(keys)
        hd = self.head_dim
        if queries is not None:
            queries = queries.view(*queries.shape[:2], -1, hd).transpose(1, 2)
        if keys is not None:
            assert values is not None  # keys and values come together
            keys, values = keys.view(*keys.shape[:2], -1, hd).transpose(1, 2), \
                values.view(*values.shape[:2], -1, hd).transpose(1, 2)
        if self.qk_norm == "head":  # (B, H, T, hd): each head's vector
            queries = None if queries is None else self.q_norm(queries)
            keys = None if keys is None else self.k_norm(keys)
        return queries, keys, values

    def project_memory(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """The keys and values of ``memory (B, Tk, d_in)``, split into heads: ``(B, Hkv, Tk, hd)`` each.

        A decoder's cross-attention attends to the same encoder output at every step, so it computes these once
        per source and passes them back to :meth:`forward` as ``memory_kv``.
        """
        memory = as_batched(memory, self.d_in, type(self).__name__, "memory")[0]
        _, keys, values = self.split_heads(None, self.W_key(memory), self.W_value(memory))
        # contiguous once here, rather than copied by the score and context matmuls at every step
        return keys.contiguous(), values.contiguous()

    def padding(self, attention_mask: Tensor, attn_mask: Tensor | None, keys: Tensor,
                kv_cache: LayerCache | None = None) -> Tensor:
        """A caller's ``(B, Tk)`` padding mask of the keys, checked and made bool ``(B, 1, 1, Tk)``."""
        owner = type(self).__name__
        if attn_mask is not None:
            raise ValueError(f"{owner}: give attention_mask (B, T) or attn_mask (broadcastable to the scores), not "
                             "both")
        if kv_cache is not None:
            raise ValueError(f"{owner}: a (B, T) attention_mask cannot be combined with kv_cache; a model passes "
                             "attn_mask over all the cached keys instead")
        return key_padding(attention_mask, keys[:, 0], owner)  # keys[:, 0]: (B, Tk, hd)

    def visible(self, keys: Tensor, values: Tensor, mask: Tensor | None, t: int,
                kv_cache: LayerCache | None) -> tuple[Tensor, Tensor, Tensor | None, bool]:
        """The keys and values the ``t`` queries attend to, the mask of what each may see, and whether the kernel's
        own (top-left) causal mask says it: without a cache, ``mask`` with the window (if it cuts anything); with
        one, every key so far and the cache's own mask (causal bottom-right, within the window)."""
        if kv_cache is None:
            if self.context_length is not None:
                check_length(keys.shape[-2], self.context_length, type(self).__name__)
            window = self.sliding_window
            if not self.is_causal or window is None or window >= keys.shape[-2]:  # a window as wide cuts nothing
                return keys, values, mask, self.is_causal
            return keys, values, and_masks(mask, sliding_window_mask(t, t, window, keys.device)), False
        keys, values = kv_cache.update(keys, values)
        if self.context_length is not None:
            check_length(keys.shape[-2], self.context_length, type(self).__name__)
        if mask is not None:  # the padding of the keys it returned (a rolling cache keeps a few)
            mask = kv_cache.select_keys(mask)
        seen = kv_cache.attn_mask(t, self.is_causal, self.sliding_window)
        return keys, values, (seen if mask is None else and_masks(mask, seen)), False

    def attend(self, queries: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None, is_causal: bool,
               return_weights: bool) -> tuple[Tensor, Tensor | None]:
        """Step 3, by the spec's backend: ``(B, H, Tq, hd)`` contexts and, if asked, ``(B, H, Tq, Tk)`` weights.
        Query head h reads key/value head ``h // group_size``."""
        return attend(queries, keys, values, attn_mask=mask, is_causal=is_causal,
                      dropout_p=self.dropout.p if self.training else 0.0, scale=self.scale,
                      enable_gqa=self.num_kv_heads != self.num_heads, backend=self.backend,
                      return_weights=return_weights, softcap=self.softcap, sinks=self.sinks)

    def scored_heads(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """For one sequence ``x (T, d_in)`` at positions 0..T−1: queries, keys and values ``(num_heads, T, hd)`` as
        the scores see them (normalised, rotated), each key/value head repeated for the query heads it serves.

        What :func:`attnlab.inspect.capture` records, so that the arithmetic it explains is the model's.
        """
        q, k, v = self.heads(x[None])
        return q[0], k[0].repeat_interleave(self.group_size, 0), v[0].repeat_interleave(self.group_size, 0)

    def extra_repr(self) -> str:
        s = self.spec
        options = (("num_kv_heads", s.num_kv_heads if s.num_kv_heads != s.num_heads else None),
                   ("rotary", self.rotary is not None or None), ("sliding_window", s.sliding_window),
                   ("qk_norm", s.qk_norm), ("softcap", s.softcap), ("sinks", s.sinks or None), ("scale", s.scale),
                   ("output_gate", s.output_gate or None),
                   ("is_causal", s.is_causal), ("backend", s.backend if s.backend != "auto" else None))
        extra = "".join(f", {name}={value}" for name, value in options if value is not None)
        return f"d_in={s.d_in}, d_out={s.d_out}, num_heads={s.num_heads}, head_dim={s.head_dim}{extra}"
