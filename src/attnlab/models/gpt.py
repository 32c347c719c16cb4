"""GPT: a decoder-only Transformer (GPT-2's layout, nanoGPT's style).

    idx (B, T) -> token embedding + learned position -> N pre-LN causal blocks -> final LayerNorm
               -> head (by default the token embedding, transposed: weight tying) -> logits (B, T, vocab)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.i18n import tr
from attnlab.layers import LayerNorm, LearnedPositionalEmbedding, TransformerBlock
from attnlab.models.caches import KVCache, StaticKVCache, compute_dtype
from attnlab.models.checks import IGNORE_INDEX, check_decoder_inputs
from attnlab.models.config import Presets, common_checks
from attnlab.models.initialisation import STD, init_weights
from attnlab.models.outputs import CausalLMOutput


@dataclass
class GPTConfig(Presets):
    """A GPT-style decoder (see :class:`attnlab.models.GPT`).

    Args:
        vocab_size: number of token ids.
        context_length: the most positions the model has (learned position table size).
        d_model: width of every token vector.
        num_layers: number of pre-LN causal blocks.
        num_heads: attention heads per block; must divide ``d_model``.
        d_ff: feed-forward hidden width; None means ``4 · d_model``.
        dropout: on embeddings, attention weights and sublayer outputs, training only.
        qkv_bias: biases on the query/key/value projections (GPT-2 has them).
        bias: biases on the attention output projection, the feed-forward maps and the LayerNorms
            (nanoGPT's ``bias=False`` is ``bias=False, qkv_bias=False``).
        activation: feed-forward non-linearity (GPT-2: ``"gelu_tanh"``).
        layer_norm_eps: LayerNorm epsilon.
        backend: attention backend for the blocks.
        tie_weights: the output head shares the token embedding's matrix (GPT-2); False gives the head its own.
    """

    vocab_size: int
    context_length: int
    d_model: int
    num_layers: int
    num_heads: int
    d_ff: int | None = None
    dropout: float = 0.0
    qkv_bias: bool = False
    bias: bool = True
    activation: str = "gelu_tanh"
    layer_norm_eps: float = 1e-5
    backend: str = "auto"
    tie_weights: bool = True

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        # trains in seconds on a laptop CPU; byte-sized vocabulary by default
        "tiny": dict(vocab_size=256, context_length=32, d_model=32, num_layers=2, num_heads=2, qkv_bias=True),
        # nanoGPT's "baby" Shakespeare model
        "baby": dict(vocab_size=256, context_length=64, d_model=128, num_layers=4, num_heads=4, qkv_bias=True),
        "gpt2-small": dict(vocab_size=50257, context_length=1024, d_model=768, num_layers=12, num_heads=12,
                           qkv_bias=True),
        "gpt2-xl": dict(vocab_size=50257, context_length=1024, d_model=1600, num_layers=48, num_heads=25,
                        qkv_bias=True),
    }

    def __post_init__(self) -> None:
        if self.d_ff is None:
            self.d_ff = 4 * self.d_model if isinstance(self.d_model, int) else self.d_model
        common_checks(self, type(self).__name__)

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads


class GPT(nn.Module):
    """A GPT-2-style language model.

    Example:
        >>> model = GPT(GPTConfig.from_preset("tiny"))
        >>> model(torch.zeros(2, 5, dtype=torch.long)).logits.shape      # (B, T, vocab)
        torch.Size([2, 5, 256])
    """

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        if not isinstance(config, GPTConfig):
            raise TypeError(tr("GPT: config must be a GPTConfig, got {config_type}", config_type=type(config).__name__))
        self.config = c = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.pos_emb = LearnedPositionalEmbedding(c.d_model, c.context_length)
        self.drop = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(
            TransformerBlock(c.d_model, c.num_heads, c.d_ff, dropout=c.dropout, norm="pre", is_causal=True,
                             activation=c.activation, qkv_bias=c.qkv_bias, bias=c.bias, eps=c.layer_norm_eps,
                             backend=c.backend)
            for _ in range(c.num_layers)
        )
        self.ln_f = LayerNorm(c.d_model, eps=c.layer_norm_eps, bias=c.bias)  # pre-LN needs a last norm
        self.head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        if c.tie_weights:
            self.head.weight = self.tok_emb.weight  # weight tying: one matrix reads and writes tokens
        self.apply(init_weights)
        # GPT-2: residual projections scaled by 1/sqrt(2 · num_layers), so the residual stream's
        # variance does not grow with depth (two residual additions per block)
        for block in self.blocks:
            for proj in (block.attn.out_proj, block.ff.linear2):
                nn.init.normal_(proj.weight, mean=0.0, std=STD / math.sqrt(2 * c.num_layers))

    def num_parameters(self) -> int:
        """Trainable parameters (a tied head counted once)."""
        return sum(p.numel() for p in self.parameters())

    def new_cache(self, batch: int, context_length: int | None = None, *,
                  static: bool = False) -> KVCache | StaticKVCache:
        """An empty cache for ``batch`` sequences of up to ``context_length`` (default: the model's) positions,
        in the dtype the model computes in here (autocast's, under autocast): a :class:`~attnlab.models.KVCache`,
        or with ``static`` a :class:`~attnlab.models.StaticKVCache` for :meth:`decode_step`."""
        c, w = self.config, self.tok_emb.weight
        cls = StaticKVCache if static else KVCache
        return cls(c.num_layers, batch, c.num_heads, context_length or c.context_length, c.head_dim,
                   compute_dtype(w), w.device)

    def decode_step(self, idx: Tensor, kv_cache: StaticKVCache) -> Tensor:
        """Logits of the last position ``(B, vocab_size)`` for ``idx (B, T)`` placed after what ``kv_cache`` holds.

        A decoding loop's step, in eval mode: unchecked (the loop checks its prompt once, and stops before
        ``context_length``) and capturable: positions are tensors read from the cache, shapes depend only on T,
        nothing is read back to the host. So ``torch.compile(fullgraph=True)`` traces it once for T = 1 and
        CUDA graphs replay it. Equal to :meth:`forward` with a :class:`KVCache` (tested).
        """
        positions = kv_cache.positions(idx.shape[1])  # (T,) on the device
        x = self.tok_emb(idx) + self.pos_emb.weight[positions]  # learned positions, gathered by tensor
        for i, block in enumerate(self.blocks):
            x = block(x, kv_cache=kv_cache[i])
        kv_cache.advance(idx.shape[1])
        return self.head(self.ln_f(x[:, -1]))

    def forward(self, idx: Tensor, targets: Tensor | None = None, attention_mask: Tensor | None = None,
                return_weights: bool = False, kv_cache: KVCache | None = None) -> CausalLMOutput:
        """``idx (B, T)`` token ids -> :class:`CausalLMOutput` with ``logits (B, T, vocab_size)``.

        Args:
            idx: integer ids in ``[0, vocab_size)``; ``T`` (plus what the cache holds) at most
                ``context_length``.
            targets: ``(B, T)`` the next token at each position (ids, or -100 to leave a position out);
                the output's ``loss`` is then the mean cross-entropy.
            attention_mask: ``(B, T)`` 1 = real token, 0 = padding, for a left-padded batch (``(B, cached + T)``
                with a cache: every key's); padded keys are masked and positions count real tokens only.
            return_weights: also return ``attentions``, one ``(B, H, T, T)`` weight tensor per layer
                (``(B, H, T, L)`` with a cache of ``L`` positions).
            kv_cache: a :meth:`new_cache`; the tokens are placed after the ``kv_cache.length``
                positions it holds, and their keys and values are added to it.
        """
        c = self.config
        offset = 0 if kv_cache is None else kv_cache.length
        mask, positions = check_decoder_inputs(type(self).__name__, idx, targets, attention_mask, c.vocab_size,
                                               c.context_length, offset)
        if positions is None:
            x = self.drop(self.pos_emb(self.tok_emb(idx), offset=offset))
        else:  # left padding: each row's own positions
            x = self.drop(self.tok_emb(idx) + self.pos_emb.weight[positions])
        attentions = []
        for i, block in enumerate(self.blocks):
            x = block(x, attn_mask=mask, return_weights=return_weights,
                      kv_cache=None if kv_cache is None else kv_cache[i])
            if return_weights:
                x, w = x
                attentions.append(w)
        logits = self.head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, c.vocab_size), targets.reshape(-1), ignore_index=IGNORE_INDEX)
        return CausalLMOutput(logits, loss, tuple(attentions) if return_weights else None)
