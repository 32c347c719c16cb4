"""A decoder-only language model, the part every family shares: GPT and ModernDecoder are two.

    idx (B, T) -> embed -> N causal blocks -> final norm -> head -> logits (B, T, vocab)

A family says how tokens are embedded (GPT adds a learned position, a Llama-style model rotates q and k inside its
blocks instead) and builds its blocks; the rest is written once here: the door, the loop over the blocks, the loss,
and decoding. Decoding runs the very same blocks with a cache argument: :meth:`LanguageModel.forward` with a
:class:`~attnlab.models.KVCache` (checked, eager), :meth:`LanguageModel.decode_step` with a
:class:`~attnlab.models.StaticKVCache` (unchecked, one graph per token for ``torch.compile``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.attention import MultiHeadAttention
from attnlab.attention.checks import check_head_mask
from attnlab.layers.feedforward import dropped
from attnlab.layers.initialisation import STD, init_weights
from attnlab.models.caches import CacheLayout, CacheShape, KVCache, StaticKVCache, compute_dtype
from attnlab.models.checks import IGNORE_INDEX, check_decoder_inputs


@dataclass
class CausalLMOutput:
    """What a language model's forward returns (Hugging Face's field names).

    Attributes:
        logits: ``(B, T, vocab_size)``: the scores of the next token at every position.
        loss: the mean next-token cross-entropy, when ``targets`` were given.
        attentions: with ``return_weights``: one ``(B, H, T, T)`` weight tensor per layer
            (keys ``(B, H, T, L)`` with a cache of ``L`` positions).
    """

    logits: Tensor
    loss: Tensor | None = None
    attentions: tuple[Tensor, ...] | None = None


def block_attention(block: nn.Module) -> MultiHeadAttention:
    """``block.attn``: every family's block keeps its attention there, a :class:`MultiHeadAttention` (or a
    subclass: grouped-query, a fast twin)."""
    attn = block.attn
    if not isinstance(attn, MultiHeadAttention):
        raise TypeError(f"{type(block).__name__}.attn must be a MultiHeadAttention, got {type(attn).__name__}")
    return attn


def _residual_weights(block: nn.Module, name: str) -> list[Tensor]:
    """The weights with which a block writes into the residual stream: its attention's ``out_proj`` (KDA's
    ``o_proj``) and its feed-forward's ``<name>``, or those a feed-forward of several says it has (a mixture of
    experts: :meth:`~attnlab.layers.moe.MixtureOfExperts.residual_weights`)."""
    ff = block.get_submodule("ff")
    several = getattr(ff, "residual_weights", None)
    out = "attn.out_proj" if hasattr(block.attn, "out_proj") else "attn.o_proj"  # KDA keeps transformers' name
    names = (out,) if callable(several) else (out, f"ff.{name}")
    weights: list[Tensor] = [block.get_parameter(f"{n}.weight") for n in names]
    return [*weights, *several()] if callable(several) else weights


class LanguageModel(nn.Module):
    """The shared part of a decoder-only model. A family builds ``tok_emb``, ``drop``, ``blocks``, its final norm
    (named by ``FINAL_NORM``) and ``head``, calls :meth:`init_weights`, and defines :meth:`embed`.

    ``ROTARY``: the blocks take each token's position (RoPE turns q and k by it) instead of the embedding adding it.
    """

    FINAL_NORM = "ln_f"
    ROTARY = False
    config: Any
    name: str  # what a loader calls the model it loaded (the CLI and the explorer show it); not set otherwise
    tok_emb: nn.Embedding
    drop: nn.Dropout
    blocks: nn.ModuleList
    head: nn.Linear

    def embed(self, idx: Tensor, positions: Tensor | None, offset: int) -> Tensor:
        """``idx (B, T)`` -> ``(B, T, D)``: the tokens at ``positions`` (``(T,)`` or ``(B, T)``; None: ``offset``,
        ``offset + 1``, ...)."""
        raise NotImplementedError

    def init_weights(self, residual_projections: str) -> None:
        """GPT-2's initialisation (every weight N(0, 0.02²)), then each block's two residual projections
        (``attn.out_proj`` and the feed-forward's ``residual_projections``) scaled by 1/sqrt(2 · num_layers), so
        the residual stream's variance does not grow with depth (two residual additions per block)."""
        self.apply(init_weights)
        std = STD / math.sqrt(2 * self.config.num_layers)
        for block in self.blocks:
            for weight in _residual_weights(block, residual_projections):
                nn.init.normal_(weight, mean=0.0, std=std)

    def num_parameters(self) -> int:
        """Trainable parameters (a tied head counted once)."""
        return sum(p.numel() for p in self.parameters())

    @property
    def position_limit(self) -> int | None:
        """The most positions the model can place: a learned position table's size (GPT's ``context_length``);
        None for rotary positions, which have no table to run out of (they run and decode past
        ``context_length``, the length they were trained on)."""
        return None if self.ROTARY else self.config.context_length

    def cache_layout(self) -> CacheLayout:
        """How this model's decoding cache is laid out (what :class:`~attnlab.models.KVCache` and its kin read)."""
        c, w = self.config, self.tok_emb.weight
        attns = [block_attention(block) for block in self.blocks]
        return CacheLayout(CacheShape(c.num_layers, attns[0].num_kv_heads, attns[0].head_dim),
                           tuple(a.sliding_window for a in attns), compute_dtype(w), w.device, self.position_limit,
                           tuple(a.rotary for a in attns), type(self).__name__)

    def new_cache(self, batch: int, context_length: int | None = None) -> KVCache:
        """An empty dynamic cache for ``batch`` sequences, of ``num_kv_heads`` heads per layer, in the dtype the
        model computes in here (autocast's, under autocast), holding up to ``context_length`` positions (default:
        :attr:`position_limit`; None grows without limit); a layer with a sliding window keeps only its last
        ``sliding_window`` positions (a rolling cache). The other kinds are made by their classes:
        ``StaticKVCache.for_model``, ``SinkKVCache.for_model``, ``KVCache.for_model(..., storage="int8")``."""
        return KVCache.for_model(self, batch, context_length=context_length)

    def run_blocks(self, x: Tensor, attn_mask: Tensor | None, positions: Tensor | None,
                   kv_cache: KVCache | StaticKVCache | None, return_weights: bool = False,
                   head_mask: Tensor | None = None, idx: Tensor | None = None):
        """``x (B, T, D)`` through every block, each with its layer of ``kv_cache`` (and of ``head_mask``); with
        ``return_weights`` also each layer's weights. The final norm is left to the caller (decoding normalises the
        last position only). ``idx (B, T)``, the token ids, is for a family whose blocks read more of them than
        ``x`` (Gemma 4's per-layer inputs); unused here."""
        where = {"positions": positions} if self.ROTARY else {}
        attentions = []
        layers = [None] * len(self.blocks) if kv_cache is None else kv_cache.layers
        for i, (block, layer) in enumerate(zip(self.blocks, layers, strict=True)):
            x = block(x, attn_mask=attn_mask, return_weights=return_weights, kv_cache=layer,
                      head_mask=None if head_mask is None else head_mask[i], **where)
            if return_weights:
                x, w = x
                attentions.append(w)
        return (x, tuple(attentions)) if return_weights else x

    def logits(self, x: Tensor) -> Tensor:
        """The final norm, then the head: ``(..., D)`` -> ``(..., vocab_size)``."""
        return self.head(getattr(self, self.FINAL_NORM)(x))

    def forward(self, idx: Tensor, targets: Tensor | None = None, attention_mask: Tensor | None = None,
                return_weights: bool = False, kv_cache: KVCache | None = None,
                head_mask: Tensor | None = None, logits_to_keep: int = 0) -> CausalLMOutput:
        """``idx (B, T)`` token ids -> :class:`CausalLMOutput` with ``logits (B, T, vocab_size)``.

        Args:
            idx: integer ids in ``[0, vocab_size)``; ``T`` (plus what the cache holds) at most
                :attr:`position_limit` (a learned position table's size; RoPE has none).
            targets: ``(B, T)`` the next token at each position (ids, or -100 to leave a position out);
                the output's ``loss`` is then the mean cross-entropy.
            attention_mask: ``(B, T)`` 1 = real token, 0 = padding, for a left-padded batch (``(B, cached + T)``
                with a cache: every key's). Padded keys are masked, and each token sits at its position among
                the real tokens of its row, so a padded row computes what it would alone.
            return_weights: also return ``attentions``, one ``(B, H, T, L)`` weight tensor per layer (``L``: the
                keys, the cached ones included).
            kv_cache: a :meth:`new_cache`; the tokens are placed after the ``kv_cache.length`` positions it
                holds, and their keys and values are added to it.
            head_mask: ``(num_layers, num_heads)``: head h of layer l has its output multiplied by
                ``head_mask[l, h]`` before ``out_proj`` (0 removes it); differentiable, for head importance.
            logits_to_keep: the logits of the last ``logits_to_keep`` positions only, ``(B, logits_to_keep,
                vocab_size)`` (0: of every position; Hugging Face's name). A decoding loop's prompt needs only the
                last one's: GPT-2 small's head (50,257 × 768) over every position of a 32-token prompt took longer
                than a decoding step (75 ms against about 45 on a 2-core CPU). Not with ``targets``.
        """
        c = self.config
        if isinstance(logits_to_keep, bool) or not isinstance(logits_to_keep, int) or logits_to_keep < 0:
            raise ValueError(f"{type(self).__name__}: logits_to_keep must be an int >= 0 (0: every position), got "
                             f"{logits_to_keep!r}")
        if logits_to_keep and targets is not None:
            raise ValueError(f"{type(self).__name__}: logits_to_keep={logits_to_keep} keeps only the last positions' "
                             "logits, and the loss over targets needs every position's: give one or the other")
        offset = 0 if kv_cache is None else kv_cache.length
        mask, positions = check_decoder_inputs(type(self).__name__, idx, targets, attention_mask, c.vocab_size,
                                               self.position_limit, offset)
        if head_mask is not None:
            check_head_mask(head_mask, (c.num_layers, c.num_heads), type(self).__name__)
        x = dropped(self.drop, self.embed(idx, positions, offset))
        x = self.run_blocks(x, mask, positions, kv_cache, return_weights, head_mask, idx=idx)
        x, attentions = x if return_weights else (x, None)
        logits = self.logits(x[:, -logits_to_keep:] if logits_to_keep else x)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, c.vocab_size), targets.reshape(-1), ignore_index=IGNORE_INDEX)
        return CausalLMOutput(logits, loss, attentions)

    def decode_step(self, idx: Tensor, kv_cache: KVCache | StaticKVCache, attn_mask: Tensor | None = None,
                    positions: Tensor | None = None) -> Tensor:
        """Logits of the last position ``(B, vocab_size)`` for ``idx (B, T)`` placed after what ``kv_cache`` holds.

        A decoding loop's step, in eval mode: unchecked (the loop checks its prompt once, and stops before a
        cache's end). With a left-padded batch the loop passes the key padding ``attn_mask (B, 1, 1, L)`` over every
        position so far and each new token's ``positions (B, T)``; else the positions come from the cache. With a
        :class:`~attnlab.models.StaticKVCache` it is capturable: positions are tensors read from the cache, shapes
        depend only on T, nothing is read back to the host, so ``torch.compile(fullgraph=True)`` traces it once for
        T = 1 and CUDA graphs replay it. The same blocks as :meth:`forward`; equal to it (tested).
        """
        if positions is None:
            positions = kv_cache.positions(idx.shape[1])  # (T,), on the device for a static cache
        x = self.run_blocks(self.embed(idx, positions, 0), attn_mask, positions, kv_cache, idx=idx)
        kv_cache.advance(idx.shape[1])
        return self.logits(x[:, -1])
