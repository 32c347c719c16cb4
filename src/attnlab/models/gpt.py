"""GPT: a decoder-only Transformer (GPT-2's layout, nanoGPT's style).

    idx (B, T) -> token embedding + learned position -> N pre-LN causal blocks -> final LayerNorm
               -> head (the token embedding, transposed: weight tying) -> logits (B, T, vocab)
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch
from torch import Tensor, nn

from attnlab.layers import LayerNorm, LearnedPositionalEmbedding, TransformerBlock
from attnlab.models.config import GPTConfig
from attnlab.models.initialisation import STD, init_weights
from attnlab.models.inputs import check_token_ids
from attnlab.models.kv_cache import KVCache
from attnlab.models.outputs import GPTOutput


class GPT(nn.Module):
    """A GPT-2-style language model.

    Example:
        >>> model = GPT(GPTConfig.from_preset("tiny"))
        >>> model(torch.zeros(2, 5, dtype=torch.long)).shape      # (B, T, vocab)
        torch.Size([2, 5, 256])
    """

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        if not isinstance(config, GPTConfig):
            raise TypeError(f"GPT: config must be a GPTConfig, got {type(config).__name__}")
        self.config = c = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.pos_emb = LearnedPositionalEmbedding(c.context_length, c.d_model)
        self.drop = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(
            TransformerBlock(c.d_model, c.n_heads, c.d_ff, dropout=c.dropout, norm="pre", causal=True,
                             activation=c.activation, qkv_bias=c.qkv_bias, bias=c.bias, eps=c.layer_norm_eps,
                             backend=c.backend)
            for _ in range(c.n_layers)
        )
        self.ln_f = LayerNorm(c.d_model, eps=c.layer_norm_eps, bias=c.bias)  # pre-LN needs a last norm
        self.head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self.head.weight = self.tok_emb.weight  # weight tying: one matrix reads and writes tokens
        self.apply(init_weights)
        # GPT-2: residual projections scaled by 1/sqrt(2 · n_layers), so the residual stream's
        # variance does not grow with depth (two residual additions per block)
        for block in self.blocks:
            for proj in (block.attn.out_proj, block.ff.linear2):
                nn.init.normal_(proj.weight, mean=0.0, std=STD / math.sqrt(2 * c.n_layers))

    def num_parameters(self) -> int:
        """Trainable parameters, the tied head counted once."""
        return sum(p.numel() for p in self.parameters())

    def new_kv_cache(self, batch: int, max_len: int | None = None) -> KVCache:
        """An empty cache for ``batch`` sequences of up to ``max_len`` (default: context_length) positions."""
        c, w = self.config, self.tok_emb.weight
        return KVCache(c.n_layers, batch, c.n_heads, max_len or c.context_length, c.head_dim, w.dtype, w.device)

    def forward(self, idx: Tensor, output_attentions: bool = False, kv_cache: KVCache | None = None):
        """``idx (B, T)`` token ids -> logits ``(B, T, vocab_size)``.

        Args:
            idx: integer ids in ``[0, vocab_size)``; ``T`` (plus what the cache holds) at most
                ``context_length``.
            output_attentions: return a :class:`GPTOutput` with ``logits`` and ``attentions``,
                one ``(B, H, T, T)`` weight tensor per layer (``(B, H, T, L)`` with a cache of
                ``L`` positions), instead of the bare logits.
            kv_cache: a :meth:`new_kv_cache`; the tokens are placed after the ``kv_cache.length``
                positions it holds, and their keys and values are added to it.
        """
        owner = type(self).__name__
        check_token_ids(idx, self.config.vocab_size, owner)
        offset = 0 if kv_cache is None else kv_cache.length
        if offset + idx.shape[1] > self.config.context_length:
            raise ValueError(
                f"{owner}: {offset} cached + {idx.shape[1]} new tokens exceed context_length="
                f"{self.config.context_length}; crop idx to its last {self.config.context_length} tokens"
            )
        x = self.drop(self.pos_emb(self.tok_emb(idx), offset=offset))
        attentions = []
        for i, block in enumerate(self.blocks):
            x = block(x, return_weights=output_attentions, kv_cache=None if kv_cache is None else kv_cache[i])
            if output_attentions:
                x, w = x
                attentions.append(w)
        logits = self.head(self.ln_f(x))
        return GPTOutput(logits, tuple(attentions)) if output_attentions else logits

    def generate(self, idx: Tensor, max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None,
                 top_p: float | None = None, generator: torch.Generator | None = None) -> Tensor:
        """Append ``max_new_tokens`` sampled tokens to ``idx (B, T)``: returns ``(B, T + max_new_tokens)``.

        See :func:`attnlab.generation.generate` (KV cache; temperature 0 is greedy; beyond the
        context the window is cropped and recomputed).
        """
        from attnlab.generation.decode import generate  # the decoding loop lives with the samplers

        return generate(self, idx, max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
                        generator=generator)

    def generate_stream(self, idx: Tensor, max_new_tokens: int, temperature: float = 1.0,
                        top_k: int | None = None, top_p: float | None = None,
                        generator: torch.Generator | None = None) -> Iterator[Tensor]:
        """Like :meth:`generate`, but yields each new token ``(B,)`` as soon as it is sampled."""
        from attnlab.generation.decode import generate_stream

        return generate_stream(self, idx, max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
                               generator=generator)
