"""A decoder as Llama, Qwen2 and Mistral build one: GPT's layout with today's parts.

    idx (B, T) -> token embedding -> N pre-RMSNorm blocks (GQA with RoPE, SwiGLU) -> final RMSNorm
               -> head (its own matrix, or the token embedding's: weight tying) -> logits (B, T, vocab)

What changed since GPT-2, one idea each, all in :mod:`attnlab.layers` and :mod:`attnlab.attention`:

==========================  =====================================  ==============================================
GPT-2                       here                                   why
==========================  =====================================  ==============================================
learned position table      RoPE on q and k                        scores see relative positions; no table to outgrow
LayerNorm (μ, σ, β)         RMSNorm (rms only, no β)               cheaper, trains as well
GELU feed-forward, 4·D      SwiGLU, ~8/3·D, three matrices         better at the same parameter count
multi-head attention        grouped-query attention                a cache ``num_heads / num_kv_heads`` times smaller
biases everywhere           none (Qwen2: on q, k, v)               they add little; fewer parameters to load
full causal attention       optional sliding window (Mistral)      cost per token bounded by the window
==========================  =====================================  ==============================================
"""

from __future__ import annotations

import math

import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.attention.checks import check_head_mask
from attnlab.i18n import tr
from attnlab.layers import ModernBlock, RMSNorm, RotaryEmbedding
from attnlab.models.checks import IGNORE_INDEX, check_decoder_inputs
from attnlab.models.config import ModernDecoderConfig
from attnlab.models.initialisation import STD, init_weights
from attnlab.models.kv_cache import KVCache
from attnlab.models.outputs import CausalLMOutput


class ModernDecoder(nn.Module):
    """A Llama-style language model (Qwen2 with ``qkv_bias``, Mistral with ``sliding_window``).

    Called exactly like :class:`~attnlab.models.GPT`, so :func:`attnlab.generation.generate`, the trainer and
    :func:`attnlab.inspect.capture` take either.

    Example:
        >>> model = ModernDecoder(ModernDecoderConfig.from_preset("tiny"))
        >>> model(torch.zeros(2, 5, dtype=torch.long)).logits.shape      # (B, T, vocab)
        torch.Size([2, 5, 256])
        >>> model.new_kv_cache(1)[0].keys.shape     # (B, num_kv_heads, context_length, head_dim): 2 heads, not 4
        torch.Size([1, 2, 32, 8])
    """

    def __init__(self, config: ModernDecoderConfig) -> None:
        super().__init__()
        if not isinstance(config, ModernDecoderConfig):
            raise TypeError(tr("ModernDecoder: config must be a ModernDecoderConfig, got {config_type}",
                               config_type=type(config).__name__))
        self.config = c = config
        # one rotary embedding for every block: it holds no weights, only the frequencies' recipe
        self.rotary = RotaryEmbedding(c.head_dim, c.context_length, c.rope_base, c.rope_scaling)
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.drop = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(
            ModernBlock(c.d_model, c.num_heads, c.d_ff, num_kv_heads=c.num_kv_heads, head_dim=c.head_dim,
                        rotary=self.rotary, sliding_window=c.sliding_window, dropout=c.dropout, qkv_bias=c.qkv_bias,
                        out_bias=c.out_bias, eps=c.norm_eps, backend=c.backend)
            for _ in range(c.num_layers)
        )
        self.norm_f = RMSNorm(c.d_model, eps=c.norm_eps)
        self.head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        if c.tie_weights:
            self.head.weight = self.tok_emb.weight
        self.apply(init_weights)
        # as in GPT: the two residual projections of each block scaled by 1/sqrt(2 · num_layers)
        for block in self.blocks:
            for proj in (block.attn.out_proj, block.ff.down_proj):
                nn.init.normal_(proj.weight, mean=0.0, std=STD / math.sqrt(2 * c.num_layers))

    def num_parameters(self) -> int:
        """Trainable parameters (a tied head counted once)."""
        return sum(p.numel() for p in self.parameters())

    def new_kv_cache(self, batch: int, context_length: int | None = None) -> KVCache:
        """An empty cache of ``num_kv_heads`` heads per layer, for ``batch`` sequences of up to ``context_length``
        (default: the model's) positions."""
        c, w = self.config, self.tok_emb.weight
        return KVCache(c.num_layers, batch, c.num_kv_heads, context_length or c.context_length, c.head_dim, w.dtype,
                       w.device)

    def forward(self, idx: Tensor, targets: Tensor | None = None, attention_mask: Tensor | None = None,
                return_weights: bool = False, kv_cache: KVCache | None = None,
                head_mask: Tensor | None = None) -> CausalLMOutput:
        """``idx (B, T)`` token ids -> :class:`CausalLMOutput` with ``logits (B, T, vocab_size)``.

        Args:
            idx: integer ids in ``[0, vocab_size)``; ``T`` (plus what the cache holds) at most ``context_length``.
            targets: ``(B, T)`` the next token at each position (or -100 to leave it out); gives ``loss``.
            attention_mask: ``(B, T)`` 1 = real token, 0 = padding, for a left-padded batch (``(B, cached + T)``
                with a cache: every key's). Padded keys are masked, and RoPE turns each token by its position
                among the real tokens of its row, so a padded row computes what it would alone.
            return_weights: also return ``attentions``, one ``(B, num_heads, T, L)`` tensor per layer.
            kv_cache: a :meth:`new_kv_cache`; the tokens follow the ``kv_cache.length`` positions it holds.
            head_mask: ``(num_layers, num_heads)``: each query head's output times its entry before ``out_proj``.
        """
        c = self.config
        offset = 0 if kv_cache is None else kv_cache.length
        mask, positions = check_decoder_inputs(type(self).__name__, idx, targets, attention_mask, c.vocab_size,
                                               c.context_length, offset)
        if head_mask is not None:
            check_head_mask(head_mask, (c.num_layers, c.num_heads), type(self).__name__)
        x = self.drop(self.tok_emb(idx))
        attentions = []
        for i, block in enumerate(self.blocks):
            x = block(x, attn_mask=mask, positions=positions, return_weights=return_weights,
                      kv_cache=None if kv_cache is None else kv_cache[i],
                      head_mask=None if head_mask is None else head_mask[i])
            if return_weights:
                x, w = x
                attentions.append(w)
        logits = self.head(self.norm_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, c.vocab_size), targets.reshape(-1), ignore_index=IGNORE_INDEX)
        return CausalLMOutput(logits, loss, tuple(attentions) if return_weights else None)
