"""Multi-head attention (*Build a LLM From Scratch*, §3.6; "Attention Is All You Need", §3.2.2).

Several attention heads look at the same sequence, each through its own projections, and their
context vectors are concatenated:  MultiHead(X) = Concat(head_1, ..., head_h) W_o.

Two ways to build it, proven equal in the tests:

* :class:`MultiHeadAttentionWrapper` stacks ``num_heads`` independent :class:`CausalAttention`
  modules and concatenates their outputs. Easy to read; one small matmul per head.
* :class:`MultiHeadAttention` does one big projection of size ``d_out`` and *splits* it into
  heads with ``view``/``transpose``, so all heads run in one batched kernel, then mixes them with
  ``out_proj``. This is what real models do.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.attention.cache import LayerCache
from attnlab.attention.causal import CausalAttention
from attnlab.attention.checks import as_batched, check_length, check_module_options, mask_heads, one_mask, unbatch
from attnlab.attention.fused import calls_only_forward, fused_map, stack_linears
from attnlab.functional import Backend, and_masks, attend
from attnlab.functional.linear import Linear


class MultiHeadAttentionWrapper(nn.Module):
    """``num_heads`` causal heads side by side: ``(B, T, d_in)`` -> ``(B, T, num_heads · d_out)``.

    Weights, when asked for, are stacked per head: ``(B, num_heads, T, T)``.
    """

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, num_heads: int,
                 qkv_bias: bool = False, backend: Backend = "auto") -> None:
        super().__init__()
        if num_heads < 1:
            raise ValueError(f"MultiHeadAttentionWrapper: num_heads must be >= 1, got {num_heads!r}")
        self.heads = nn.ModuleList(
            CausalAttention(d_in, d_out, context_length, dropout, qkv_bias, backend=backend)
            for _ in range(num_heads)
        )

    def forward(self, x: Tensor, attention_mask: Tensor | None = None, return_weights: bool = False):
        outs = [head(x, attention_mask, return_weights=return_weights) for head in self.heads]
        if not return_weights:
            return torch.cat(outs, dim=-1)
        return torch.cat([o for o, _ in outs], dim=-1), torch.stack([w for _, w in outs], dim=-3)


class MultiHeadAttention(nn.Module):
    """Multi-head attention with weight splitting and an output projection, called as in the book.

    ``MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads, qkv_bias=False)``: the book's
    positional arguments, in the book's order. Self-attention is ``mha(x)`` (queries, keys and values all
    from ``x``); cross-attention is ``mha(x, memory)`` (queries from ``x``, keys and values from ``memory``).

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

    Calling it, ``mha(x, memory=None, *, attention_mask=None, attn_mask=None, return_weights=False,
    kv_cache=None, memory_kv=None, head_mask=None)``:
        x: the queries' sequence ``(B, Tq, d_in)`` or ``(Tq, d_in)``.
        memory: the keys' and values' sequence ``(B, Tk, d_in)``; None for self-attention.
        attention_mask: ``(B, Tk)`` padding mask of the keys' sequence, 1 = real token (checked here).
        attn_mask: instead, a mask already broadcastable to the scores ``(B, H, Tq, Tk)`` (bool, True =
            may attend, or float, added), from a model that checked its inputs; used as it is (with a
            ``kv_cache`` it spans every cached key, and the causal mask is added to it).
        return_weights: also return the weights ``(B, H, Tq, Tk)``.
        kv_cache: decoding: an object whose ``update(k, v)`` appends this call's keys and values
            ``(B, H, T, head_dim)`` and returns all of them so far ``(B, H, L, head_dim)``, and whose
            ``attn_mask(T, is_causal)`` says which of them the new queries may attend. The T new queries
            sit at positions ``L - T .. L - 1``, so query i may attend keys ``j <= L - T + i`` (bottom-right
            aligned; torch's ``is_causal`` is top-left aligned, hence the explicit mask).
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
        check_module_options(owner, backend, dropout)
        self.d_in, self.d_out, self.num_heads = d_in, d_out, num_heads
        self.head_dim = d_out // num_heads
        self.context_length, self.is_causal, self.backend = context_length, is_causal, backend
        if scale is not None and (isinstance(scale, bool) or not isinstance(scale, int | float) or not scale > 0):
            raise ValueError(f"{owner}: scale must be None (1/√head_dim) or a number > 0, got {scale!r}")
        self.scale = scale  # None: 1/√head_dim; GPT-2's scale_attn_by_inverse_layer_idx divides it by layer + 1
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = Linear(d_out, d_out, bias=out_bias)  # mixes what the heads found
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, memory: Tensor | None = None, *, attention_mask: Tensor | None = None,
                attn_mask: Tensor | None = None, return_weights: bool = False, kv_cache: LayerCache | None = None,
                memory_kv: tuple[Tensor, Tensor] | None = None, head_mask: Tensor | None = None):
        """Attend from ``x`` to ``memory`` (default: ``x`` itself); arguments and shapes: the class docstring."""
        self.check_call(memory, attention_mask, kv_cache, memory_kv)               # arguments that exclude others
        x, unbatched = as_batched(x, self.d_in, type(self).__name__)              # (B, T, d_in); (T, d_in): B = 1
        b, num_tokens, _ = x.shape                                                 # B, T
        # 1. project: queries from x, keys and values from memory (or x); 2. split d_out into H heads of hd
        queries, keys, values = self.project_qkv(x, memory, memory_kv)             # (B, H, T, hd), (B, H, Tk, hd)
        mask = self.padding_mask(keys, attention_mask, attn_mask)                  # (B, 1, 1, Tk), or the model's
        if kv_cache is not None:  # decoding: the cached keys and values come first  (B, H, L, hd), L = cached + T
            keys, values, mask = self.extend_cache(kv_cache, keys, values, mask, num_tokens)
        # 3. scores Q Kᵀ / √hd, masked, softmax over the keys, dropout, weighted sum of the values
        context, weights = attend(queries, keys, values, attn_mask=mask,          # (B, H, T, hd), (B, H, T, Tk)
                                  is_causal=self.is_causal and kv_cache is None,  # a cache's mask says it instead
                                  dropout_p=self.dropout.p if self.training else 0.0, scale=self.scale,
                                  backend=self.backend, return_weights=return_weights)
        # 4. merge the heads back into d_out, then mix them
        context = mask_heads(context, head_mask, type(self).__name__)              # head h times head_mask[h]
        context = context.transpose(1, 2).reshape(b, num_tokens, -1)               # (B, T, H, hd) -> (B, T, d_out)
        return unbatch(self.out_proj(context), weights, unbatched, return_weights)  # (B, T, d_out)

    def split_heads(self, t: Tensor) -> Tensor:
        """``(B, T, d_out)`` -> ``(B, num_heads, T, head_dim)``. The heads are counted from ``t``'s width: under
        tensor parallelism a process holds a whole group of them, ``d_out / tp`` wide."""
        b, n, _ = t.shape
        return t.view(b, n, -1, self.head_dim).transpose(1, 2)

    def project_qkv(self, x: Tensor, memory: Tensor | None = None,
                    memory_kv: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """Steps 1 and 2: ``queries`` from ``x (B, Tq, d_in)``, ``keys`` and ``values`` from ``memory`` (default
        ``x``) or taken from ``memory_kv``, each split into heads: ``(B, H, Tq, hd)``, ``(B, H, Tk, hd)`` twice."""
        if memory is None and memory_kv is None:  # self-attention: one matmul where it is the same
            fused = fused_map(self, self.W_query, self.W_key, self.W_value)  # inference: stacked once, kept
            if fused is not None:  # (B, T, 3 · d_out) -> q, k, v (B, H, T, hd): one view, one permute
                b, n, _ = x.shape
                return fused(x).view(b, n, 3, -1, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
            if self.may_stack():  # training: the weights stacked at each call (autograd flows through them)
                return self.project_stacked(x)
        queries = self.split_heads(self.W_query(x))
        if memory_kv is not None:
            return queries, *memory_kv
        source = x if memory is None else as_batched(memory, self.d_in, type(self).__name__, "memory")[0]
        return queries, self.split_heads(self.W_key(source)), self.split_heads(self.W_value(source))

    def may_stack(self) -> bool:
        """Whether :meth:`project_stacked` may stand in for the three maps: while training with autograd on, when
        calling each map would run ``nn.Linear.forward`` and nothing else (:func:`calls_only_forward`).

        Stacking copies the weights, which costs as much as the matmul when a few tokens are all there is to
        project (decoding), so inference stacks them once and keeps the copy (:mod:`attnlab.attention.fused`).
        """
        return (self.training and torch.is_grad_enabled()
                and all(calls_only_forward(m, nn.Linear) for m in (self.W_query, self.W_key, self.W_value)))

    def project_stacked(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``W_query(x)``, ``W_key(x)``, ``W_value(x)`` split into heads, as one matmul over the stacked weights
        (nanoGPT's ``c_attn``): two kernel calls fewer each way, and x's gradient comes out of one matmul
        instead of three summed (about 2 % of a small GPT's training step on a CPU)."""
        stacked = F.linear(x, *stack_linears(self.W_query, self.W_key, self.W_value))  # (B, T, 3 · d_out)
        return tuple(self.split_heads(t) for t in stacked.chunk(3, dim=-1))  # this process' heads: d_out / tp wide

    def project_memory(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """The keys and values of ``memory (B, Tk, d_in)``, split into heads: ``(B, H, Tk, head_dim)`` each.

        A decoder's cross-attention attends to the same encoder output at every step, so it computes these once
        per source and passes them back to :meth:`forward` as ``memory_kv``.
        """
        memory = as_batched(memory, self.d_in, type(self).__name__, "memory")[0]
        # contiguous once here, rather than copied by the score and context matmuls at every step
        return (self.split_heads(self.W_key(memory)).contiguous(),
                self.split_heads(self.W_value(memory)).contiguous())

    def padding_mask(self, keys: Tensor, attention_mask: Tensor | None, attn_mask: Tensor | None) -> Tensor | None:
        """The mask over ``keys (B, H, Tk, hd)``: a caller's ``(B, Tk)`` padding mask, checked and made bool
        ``(B, 1, 1, Tk)``, or a model's ``attn_mask`` as it is; and ``Tk`` checked against ``context_length``."""
        check_length(keys.shape[-2], self.context_length, type(self).__name__)
        if attention_mask is None:  # the common case, and a decoding step's: no view of the keys to make
            return attn_mask
        return one_mask(attention_mask, attn_mask, keys[:, 0], type(self).__name__)  # keys[:, 0]: (B, Tk, hd)

    def extend_cache(self, kv_cache: LayerCache, keys: Tensor, values: Tensor, mask: Tensor | None,
                     num_tokens: int) -> tuple[Tensor, Tensor, Tensor | None]:
        """Decoding: this step's ``keys``, ``values (B, H, T, hd)`` appended to the cache; all of them so far
        ``(B, H, L, hd)`` and the mask of what the ``num_tokens`` new queries may see among them (the causal part
        bottom-right aligned, which is why :meth:`forward` then passes ``is_causal=False``), with ``mask``."""
        keys, values = kv_cache.update(keys, values)
        check_length(keys.shape[-2], self.context_length, type(self).__name__)
        return keys, values, and_masks(mask, kv_cache.attn_mask(num_tokens, self.is_causal))

    def check_call(self, memory: Tensor | None, attention_mask: Tensor | None, kv_cache: LayerCache | None,
                   memory_kv: tuple[Tensor, Tensor] | None) -> None:
        """The arguments of :meth:`forward` that exclude each other."""
        owner = type(self).__name__
        if memory_kv is not None and (memory is not None or kv_cache is not None):
            raise ValueError(f"{owner}: memory_kv holds the memory's keys and values already; give it without "
                             "memory and without kv_cache")
        if kv_cache is not None and attention_mask is not None:
            raise ValueError(f"{owner}: a padding mask cannot be combined with kv_cache; a model passes attn_mask "
                             "over all the cached keys instead")
