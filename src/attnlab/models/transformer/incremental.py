"""The encoder-decoder's decoder, one token per call: what greedy and beam search run at every step.

:meth:`Transformer.decode` with a :class:`~attnlab.models.KVCache` is the general way in: it checks the ids,
builds masks and runs every block through its modules and the attention backends. For a decoding step that is
most of the time: the work itself is one token per row. :class:`IncrementalDecoder` does the same arithmetic with
the blocks' own parameters, and no more:

* nothing checked inside (the search checked the source once at its door; the ids it feeds come from argmax and
  topk), nothing read back from the device;
* the self-attention's three projections as one matrix product (their weights concatenated once), the
  scores' 1/√head_dim folded into the query projections;
* the keys and values of the target tokens written in place into one buffer per layer allocated once,
  position-major, ``(length, N, 2, H, head_dim)``: the part filled so far is one contiguous block, so following
  the beams (:meth:`IncrementalDecoder.reorder`) copies just that block, into a second buffer;
* the memory's cross-attention keys and values projected once per *source*, ``(B, H, S, head_dim)``, never copied
  per beam: the ``beams`` rows of a source are its queries, ``(B, H, beams, head_dim)``, so one product serves them.

Rows are grouped by source: rows ``b·beams .. b·beams + beams - 1`` belong to source ``b``. Eval mode only
(no dropout); the tests prove each step equal to :meth:`Transformer.decode` over the whole prefix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.attention.multihead import stack_linears
from attnlab.layers.feedforward import activate


def _linear(module: nn.Linear) -> tuple[Tensor, Tensor | None]:
    return module.weight, module.bias


def _norm(ln: nn.Module) -> tuple[Tensor, Tensor | None, float]:
    return ln.weight, ln.bias, ln.eps


@dataclass
class _Layer:
    """One decoder block's parameters and buffers, as the step uses them."""

    qkv: tuple[Tensor, Tensor | None]  # the self-attention's W_query / √head_dim, W_key, W_value stacked: (3D, D)
    self_out: tuple[Tensor, Tensor | None]
    cross_q: tuple[Tensor, Tensor | None]  # W_query / √head_dim
    cross_out: tuple[Tensor, Tensor | None]
    ff1: tuple[Tensor, Tensor | None]
    ff2: tuple[Tensor, Tensor | None]
    norms: tuple[tuple[Tensor, Tensor | None, float], ...]  # ln1, ln2, ln3
    memory_keys_t: Tensor  # (B, H, head_dim, S): transposed once, for the score product
    memory_values: Tensor  # (B, H, S, head_dim)
    kv: Tensor  # (length, N, 2, H, head_dim): keys and values, filled up to the decoder's position
    spare: Tensor  # where reorder writes; then the two swap


class IncrementalDecoder:
    """Decode one token per row per call: ``tokens (N,)`` -> next-token logits ``(N, vocab_size)``.

    Made by :meth:`attnlab.models.Transformer.incremental_decoder`; ``N = B · beams`` rows, source ``b``'s beams
    in rows ``b·beams ..``. ``position`` is the number of tokens fed so far (the next one's position).

    Args:
        model: the Transformer (its current parameters are used; it should be in eval mode).
        memory: the encoder's output ``(B, S, D)``.
        src_mask: ``(B, S)`` bool, True = real token (every source holds at least one); None: all real.
        beams: rows per source, >= 1.
        length: the most tokens fed in all, <= the model's context_length.
    """

    def __init__(self, model: nn.Module, memory: Tensor, src_mask: Tensor | None, beams: int, length: int) -> None:
        c = model.config
        self.num_heads, self.head_dim, self.beams = c.num_heads, c.head_dim, beams
        self.norm, self.activation = c.norm, c.activation
        # the token embeddings already times √d_model (§3.4), the positions in the compute dtype: one add per step
        self.embedding = model.embedding.weight * math.sqrt(c.d_model)
        self.positions = model.positions.pe[:length].to(memory.dtype)
        self.final_norm = None if model.decoder_norm is None else _norm(model.decoder_norm)
        self.head = model.head.weight
        b, s, _ = memory.shape
        self.rows = b * beams
        dtype = memory.dtype
        # the memory's padding as a term added to the scores: 0 where real, -inf where padding  (B, 1, 1, S);
        # None when every position is real
        self.memory_bias = None if src_mask is None else torch.zeros(
            b, 1, 1, s, dtype=dtype, device=memory.device).masked_fill(~src_mask[:, None, None, :], float("-inf"))
        shape = (length, self.rows, 2, self.num_heads, self.head_dim)
        scale = self.head_dim ** -0.5
        self.layers = []
        for block in model.decoder_blocks:
            keys, values = block.cross_attn.project_memory(memory)  # (B, H, S, head_dim), once per source
            sa, ca = block.self_attn, block.cross_attn
            self.layers.append(_Layer(
                stack_linears(sa.W_query, sa.W_key, sa.W_value, scale_first=scale), _linear(sa.out_proj),
                stack_linears(ca.W_query, scale_first=scale), _linear(ca.out_proj), _linear(block.ff.linear1),
                _linear(block.ff.linear2), (_norm(block.ln1), _norm(block.ln2), _norm(block.ln3)),
                keys.transpose(2, 3).contiguous(), values,
                torch.empty(shape, dtype=dtype, device=memory.device),
                torch.empty(shape, dtype=dtype, device=memory.device)))
        self.position = 0

    def __call__(self, tokens: Tensor) -> Tensor:
        """Feed ``tokens (N,)`` at :attr:`position`; return the logits of the token after them ``(N, vocab)``."""
        x = F.embedding(tokens, self.embedding) + self.positions[self.position]
        for layer in self.layers:
            x = self._residual(x, self._self_attention, layer, 0)
            x = self._residual(x, self._cross_attention, layer, 1)
            x = self._residual(x, self._feed_forward, layer, 2)
        self.position += 1
        if self.final_norm is not None:
            x = F.layer_norm(x, x.shape[-1:], *self.final_norm)
        return F.linear(x, self.head)

    def _residual(self, x: Tensor, sublayer, layer: _Layer, i: int) -> Tensor:
        """``x + sublayer(LN(x))`` (pre-LN) or ``LN(x + sublayer(x))`` (post-LN), as in the decoder block."""
        norm = layer.norms[i]
        if self.norm == "pre":
            return x + sublayer(F.layer_norm(x, x.shape[-1:], *norm), layer)
        return F.layer_norm(x + sublayer(x, layer), x.shape[-1:], *norm)

    def _self_attention(self, h: Tensor, layer: _Layer) -> Tensor:
        """The new token attends to every target token so far, itself included: ``(N, D)`` -> ``(N, D)``."""
        n, t = h.shape[0], self.position
        qkv = F.linear(h, *layer.qkv).view(n, 3, self.num_heads, self.head_dim)
        layer.kv[t] = qkv[:, 1:]
        kv = layer.kv[: t + 1]  # (t + 1, N, 2, H, hd)
        # one query per row: a product and a sum over head_dim beat t + 1 tiny matrix products per row and head
        weights = (kv[:, :, 0] * qkv[:, 0]).sum(-1).softmax(dim=0)  # (t + 1, N, H)
        context = (weights[..., None] * kv[:, :, 1]).sum(0)  # (N, H, hd)
        return F.linear(context.view(n, -1), *layer.self_out)

    def _cross_attention(self, h: Tensor, layer: _Layer) -> Tensor:
        """Each row attends to its source's memory; a source's beams are its queries: ``(N, D)`` -> ``(N, D)``."""
        n, b = h.shape[0], layer.memory_values.shape[0]
        q = F.linear(h, *layer.cross_q).view(b, self.beams, self.num_heads, self.head_dim).transpose(1, 2)
        scores = torch.matmul(q, layer.memory_keys_t)  # (B, H, beams, S)
        if self.memory_bias is not None:
            scores = scores.add_(self.memory_bias)
        context = torch.matmul(scores.softmax(dim=-1), layer.memory_values)  # (B, H, beams, hd)
        return F.linear(context.transpose(1, 2).reshape(n, -1), *layer.cross_out)

    def _feed_forward(self, h: Tensor, layer: _Layer) -> Tensor:
        return F.linear(activate(F.linear(h, *layer.ff1), self.activation), *layer.ff2)

    def reorder(self, rows: Tensor) -> None:
        """Row ``i`` takes over the cached keys and values of row ``rows[i] (N,)``: the surviving beams' parents,
        each a row of the same source (the memory's rows are per source, so they stay as they are)."""
        t = self.position
        for layer in self.layers:
            torch.index_select(layer.kv[:t], 1, rows, out=layer.spare[:t])
            layer.kv, layer.spare = layer.spare, layer.kv
