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

from typing import Protocol

import torch
from torch import Tensor, nn

from attnlab.attention.causal import CausalAttention
from attnlab.attention.inputs import as_batched, check_length, key_padding, unbatch
from attnlab.functional import Backend, scaled_dot_product_attention


class KVCacheLike(Protocol):
    """What :meth:`MultiHeadAttention.forward` needs from a KV cache (see ``attnlab.models.kv_cache``)."""

    def update(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]: ...


def cached_causal_mask(t_new: int, t_total: int, device: torch.device) -> Tensor | None:
    """Bool ``(t_new, t_total)``: the new queries (the last ``t_new`` positions) see keys up to their own.

    None for a single new token: it may attend every key in the cache, so no mask is needed.
    """
    if t_new == 1:
        return None
    return torch.ones(t_new, t_total, dtype=torch.bool, device=device).tril(diagonal=t_total - t_new)


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
    """Multi-head self-attention with weight splitting and an output projection.

    Args:
        d_in: input width.
        d_out: output width; split into ``num_heads`` heads of ``head_dim = d_out // num_heads``.
        num_heads: number of heads; must divide ``d_out``.
        context_length: the longest sequence accepted (None: no limit).
        dropout: dropout on the attention weights, training mode only.
        qkv_bias: give the q/k/v projections a bias (BERT does, GPT-2 does, the book does not).
        causal: mask future tokens (a decoder); False for an encoder.
        backend: attention backend, see :func:`attnlab.functional.scaled_dot_product_attention`.

    Shapes: x ``(B, T, d_in)`` or ``(T, d_in)`` -> ``(B, T, d_out)``; weights ``(B, num_heads, T, T)``.

    Example:
        >>> mha = MultiHeadAttention(d_in=768, d_out=768, num_heads=12, causal=True)
        >>> mha(torch.randn(2, 10, 768)).shape
        torch.Size([2, 10, 768])
    """

    def __init__(self, d_in: int, d_out: int, num_heads: int, context_length: int | None = None,
                 dropout: float = 0.0, qkv_bias: bool = False, causal: bool = True,
                 backend: Backend = "auto") -> None:
        super().__init__()
        if num_heads < 1 or d_out % num_heads != 0:
            raise ValueError(
                f"MultiHeadAttention: d_out must be divisible by num_heads, got d_out={d_out}, num_heads={num_heads}"
            )
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"MultiHeadAttention: dropout must be in [0, 1), got {dropout!r}")
        self.d_in, self.d_out, self.num_heads = d_in, d_out, num_heads
        self.head_dim = d_out // num_heads
        self.context_length, self.dropout_p, self.causal, self.backend = context_length, dropout, causal, backend
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)  # mixes what the heads found

    def split_heads(self, t: Tensor) -> Tensor:
        """``(B, T, d_out)`` -> ``(B, num_heads, T, head_dim)``."""
        b, n, _ = t.shape
        return t.view(b, n, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, x: Tensor, attention_mask: Tensor | None = None, return_weights: bool = False,
                kv_cache: KVCacheLike | None = None):
        """Attend over ``x (B, T, d_in)``; see the class docstring for shapes.

        ``kv_cache`` (decoding): an object whose ``update(k, v)`` appends this call's keys and values
        ``(B, H, T, head_dim)`` and returns all of them so far ``(B, H, L, head_dim)``. The T new
        queries sit at positions ``L - T .. L - 1``, so query i may attend keys ``j <= L - T + i``
        (bottom-right aligned; torch's ``is_causal`` is top-left aligned, hence the explicit mask).
        """
        owner = type(self).__name__
        x, unbatched = as_batched(x, self.d_in, owner)
        b, t, _ = x.shape
        check_length(t, self.context_length, owner)
        mask = key_padding(attention_mask, x, owner)
        q, k, v = self.split_heads(self.W_query(x)), self.split_heads(self.W_key(x)), self.split_heads(self.W_value(x))
        is_causal, backend = self.causal, self.backend
        if kv_cache is not None:
            if t == 1 and backend == "auto":
                backend = "math"  # one query: two tiny matmuls beat the flash kernel's set-up by far
            if mask is not None:
                raise ValueError(f"{owner}: attention_mask cannot be combined with kv_cache")
            k, v = kv_cache.update(k, v)
            check_length(k.shape[-2], self.context_length, owner)
            mask, is_causal = (cached_causal_mask(t, k.shape[-2], x.device) if self.causal else None), False
        out = scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=self.dropout_p if self.training else 0.0,
            is_causal=is_causal, backend=backend, return_weights=return_weights,
        )
        out, weights = out if return_weights else (out, None)
        out = self.out_proj(out.transpose(1, 2).reshape(b, t, self.d_out))  # concatenate the heads, then mix
        return unbatch(out, weights, unbatched, return_weights)
