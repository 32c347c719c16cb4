"""The decoder block of the original Transformer ("Attention Is All You Need", §3.1, the right half of Figure 1).

Three sublayers, each in a residual connection with a LayerNorm:

1. masked self-attention: each target token attends to the target tokens up to itself ("masked for
   autoregression": the decoder must not see the words it is about to predict);
2. cross-attention ("encoder-decoder attention"): queries from the decoder, keys and values from the encoder's
   output, the *memory*: in the book's call, ``mha(Q=x, K=memory, V=memory)``; in attnlab's, ``mha(x, memory)``;
3. the position-wise feed-forward network.

post-LN (the paper):  x = LN(x + SelfAttn(x));  x = LN(x + CrossAttn(x, memory));  x = LN(x + FFN(x))
pre-LN  (option):     x = x + SelfAttn(LN(x));  x = x + CrossAttn(LN(x), memory);  x = x + FFN(LN(x))

The memory itself is not normalised here: the encoder's output already is (its last LayerNorm).
"""

from __future__ import annotations

from torch import Tensor, nn

from attnlab.attention.cache import LayerCache
from attnlab.attention.multihead import MultiHeadAttention
from attnlab.layers.block import BlockSpec
from attnlab.layers.feedforward import FeedForward, dropped
from attnlab.layers.layernorm import LayerNorm


class DecoderBlock(nn.Module):
    """One decoder block: ``x (B, T, D)`` and ``memory (B, S, D)`` -> ``(B, T, D)``.

    Built from a :class:`~attnlab.layers.BlockSpec` (``norm="post"``: the paper; ``"pre"``: torch's
    ``norm_first=True``; its ``is_causal`` is ignored: the self-attention is causal, the cross-attention is not). Both
    attentions have the spec's heads, bias and backend.

    Submodules: ``self_attn`` (causal) and ``ln1``, ``cross_attn`` and ``ln2``, ``ff`` and ``ln3``.

    Example:
        >>> block = DecoderBlock(BlockSpec(d_model=16, num_heads=4, d_ff=32, norm="post", activation="relu"))
        >>> block(torch.randn(2, 5, 16), torch.randn(2, 7, 16)).shape     # 5 target tokens, 7 source tokens
        torch.Size([2, 5, 16])
    """

    def __init__(self, spec: BlockSpec) -> None:
        super().__init__()
        if not isinstance(spec, BlockSpec):
            raise TypeError(f"DecoderBlock: spec must be a BlockSpec, got {type(spec).__name__}")
        self.spec, self.norm = spec, spec.norm
        self.self_attn = MultiHeadAttention.from_spec(spec.attention(is_causal=True))
        self.ln1 = LayerNorm(spec.d_model, eps=spec.eps, bias=spec.bias)
        self.cross_attn = MultiHeadAttention.from_spec(spec.attention(is_causal=False))
        self.ln2 = LayerNorm(spec.d_model, eps=spec.eps, bias=spec.bias)
        self.ff = FeedForward(spec.d_model, spec.d_ff, activation=spec.activation, dropout=spec.dropout,
                              bias=spec.bias)
        self.ln3 = LayerNorm(spec.d_model, eps=spec.eps, bias=spec.bias)
        self.dropout = nn.Dropout(spec.dropout)  # on each attention sublayer's output, as in the paper

    def _residual(self, x: Tensor, sublayer, norm: LayerNorm) -> Tensor:
        """``x + sublayer(LN(x))`` (pre-LN) or ``LN(x + sublayer(x))`` (post-LN)."""
        if self.norm == "pre":
            return x + sublayer(norm(x))
        return norm(x + sublayer(x))

    def forward(self, x: Tensor, memory: Tensor | None = None, *, attention_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, attn_mask: Tensor | None = None,
                memory_attn_mask: Tensor | None = None, return_weights: bool = False,
                kv_cache: LayerCache | None = None, head_mask: Tensor | None = None,
                cross_head_mask: Tensor | None = None):
        """Run the three sublayers.

        Args:
            x: the target tokens ``(B, T, D)``.
            memory: the encoder's output ``(B, S, D)`` (may be None once ``kv_cache`` holds its keys and values).
            attention_mask: ``(B, T)`` padding mask of the target, 1 = real token (checked here).
            memory_mask: ``(B, S)`` padding mask of the memory, 1 = real token (checked here).
            attn_mask, memory_attn_mask: instead, a model's checked masks, broadcastable to the scores
                (``(B, 1, 1, T)`` and ``(B, 1, 1, S)`` bool, True = may attend); the causal mask is added to
                ``attn_mask`` by the self-attention itself.
            return_weights: also return the weights of the self-attention ``(B, H, T, T)`` and of the
                cross-attention ``(B, H, T, S)``.
            kv_cache: decoding: one layer's cache; ``x`` is then the new tokens, placed after the cached ones. It
                keeps the self-attention's keys and values, and the memory's (``memory_kv``), projected once per
                source: with ``beams`` rows of ``x`` per source (a search), a source's rows query its memory as one
                sequence, so the memory is never copied per beam.
            head_mask, cross_head_mask: ``(num_heads,)``: each head of the self-attention (of the cross-attention)
                has its output multiplied by its entry before ``out_proj`` (0 removes it).

        Returns:
            ``(B, T, D)``, or ``(out, self_weights, cross_weights)`` with ``return_weights``.
        """
        weights: list[Tensor | None] = []

        def self_attention(h: Tensor) -> Tensor:
            out = self.self_attn(h, attention_mask=attention_mask, attn_mask=attn_mask, return_weights=return_weights,
                                 kv_cache=kv_cache, head_mask=head_mask)
            return self._dropped(out, weights, return_weights)

        def cross_attention(h: Tensor) -> Tensor:
            memory_kv = self._memory_kv(memory, kv_cache)
            rows, sources = h.shape[0], h.shape[0] if memory_kv is None else memory_kv[0].shape[0]
            if sources != rows:  # a search's beams: each source's rows query its memory as one sequence
                h = h.reshape(sources, -1, h.shape[-1])  # (B, beams · T, D)
            out = self.cross_attn(h, None if memory_kv is not None else memory, memory_kv=memory_kv,
                                  attention_mask=memory_mask, attn_mask=memory_attn_mask,
                                  return_weights=return_weights, head_mask=cross_head_mask)
            return self._dropped(out if sources == rows else _per_row(out, rows, return_weights), weights,
                                 return_weights)

        x = self._residual(x, self_attention, self.ln1)
        x = self._residual(x, cross_attention, self.ln2)
        x = self._residual(x, self.ff, self.ln3)  # FeedForward applies its own output dropout
        return (x, *weights) if return_weights else x

    def _dropped(self, out, weights: list[Tensor | None], return_weights: bool) -> Tensor:
        if return_weights:
            out, w = out
            weights.append(w)
        return dropped(self.dropout, out)

    def _memory_kv(self, memory: Tensor | None, kv_cache: LayerCache | None) -> tuple[Tensor, Tensor] | None:
        """The memory's keys and values from the cache, projected on the first step (None without a cache)."""
        if kv_cache is None:
            if memory is None:
                raise ValueError("DecoderBlock: memory (B, S, D) is required, got None")
            return None
        if kv_cache.memory_kv is None:
            if memory is None:
                raise ValueError("DecoderBlock: the cache holds no memory keys yet, so memory (B, S, D) is required, "
                                 "got None")
            kv_cache.memory_kv = self.cross_attn.project_memory(memory)
        return kv_cache.memory_kv


def _per_row(out, rows: int, return_weights: bool):
    """A source's beams, attended as one query sequence, back to a row each: ``(B, beams · T, D)`` ->
    ``(B · beams, T, D)``, and the weights ``(B, H, beams · T, S)`` -> ``(B · beams, H, T, S)``."""
    if not return_weights:
        return out.reshape(rows, -1, out.shape[-1])
    out, w = out
    b, h, _, s = w.shape
    return out.reshape(rows, -1, out.shape[-1]), w.view(b, h, rows // b, -1, s).transpose(1, 2).reshape(rows, h, -1, s)
