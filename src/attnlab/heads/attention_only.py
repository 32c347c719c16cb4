"""The attention-only Transformer of Elhage et al. (2021) and Olsson et al. (2022): GPT without its MLPs.

    idx (B, T) -> token embedding + learned position -> N × (x = x + Attn(LN(x))) -> LN -> unembed -> (B, T, vocab)

With no feed-forward layers, all a token can learn about other tokens comes through attention, so what the model
does can be read off its heads: a one-layer model can only look up tokens by what they are (and where); a two-layer
model can compose two heads, one that writes "the token before me was A" into each position and one that looks for
that, which is an induction head.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.arguments import check_positive_int
from attnlab.attention import MultiHeadAttention
from attnlab.attention.checks import check_head_mask
from attnlab.i18n import tr
from attnlab.layers import LayerNorm, LearnedPositionalEmbedding
from attnlab.layers.initialisation import init_weights
from attnlab.models import CausalLMOutput
from attnlab.models.checks import check_decoder_inputs


def check_positive_ints(config: object, names: tuple[str, ...]) -> None:
    """Each of ``config``'s fields ``names`` is a positive int; a ValueError names the first that is not."""
    for name in names:
        check_positive_int(type(config).__name__, name, getattr(config, name), tr)


@dataclass(frozen=True)
class AttentionOnlyConfig:
    """An attention-only Transformer's sizes (every field a positive int; ``num_heads`` divides ``d_model``)."""

    vocab_size: int = 64
    context_length: int = 64
    d_model: int = 64
    num_layers: int = 2
    num_heads: int = 4

    def __post_init__(self) -> None:
        check_positive_ints(self, ("vocab_size", "context_length", "d_model", "num_layers", "num_heads"))
        if self.d_model % self.num_heads:
            raise ValueError(tr("AttentionOnlyConfig: d_model={d_model} must be divisible by num_heads={num_heads}",
                                d_model=self.d_model, num_heads=self.num_heads))


class AttentionBlock(nn.Module):
    """``x + Attn(LN(x))``: a pre-LN block with no feed-forward network. ``(B, T, D)`` -> ``(B, T, D)``."""

    def __init__(self, d_model: int, num_heads: int) -> None:
        super().__init__()
        self.ln = LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, d_model, None, 0.0, num_heads, is_causal=True)

    def forward(self, x: Tensor, return_weights: bool = False, head_mask: Tensor | None = None):
        out = self.attn(self.ln(x), return_weights=return_weights, head_mask=head_mask)
        a, weights = out if return_weights else (out, None)
        return (x + a, weights) if return_weights else x + a


class AttentionOnlyTransformer(nn.Module):
    """A causal language model made of attention alone; called like :class:`attnlab.models.GPT`, so
    :func:`attnlab.inspect.capture` looks through it.

    Example:
        >>> model = AttentionOnlyTransformer(AttentionOnlyConfig(num_layers=1))
        >>> model(torch.zeros(2, 5, dtype=torch.long), return_weights=True).attentions[0].shape  # (B, H, T, T)
        torch.Size([2, 4, 5, 5])
    """

    def __init__(self, config: AttentionOnlyConfig) -> None:
        super().__init__()
        self.config = c = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.pos_emb = LearnedPositionalEmbedding(c.d_model, c.context_length)
        self.blocks = nn.ModuleList(AttentionBlock(c.d_model, c.num_heads) for _ in range(c.num_layers))
        self.ln_f = LayerNorm(c.d_model)
        self.head = nn.Linear(c.d_model, c.vocab_size, bias=False)  # its own matrix: reading is not writing here
        self.apply(init_weights)

    def forward(self, idx: Tensor, targets: Tensor | None = None, return_weights: bool = False,
                head_mask: Tensor | None = None) -> CausalLMOutput:
        """``idx (B, T)`` -> logits ``(B, T, vocab_size)``; ``targets (B, T)`` gives the mean loss; weights per
        layer ``(B, H, T, T)`` with ``return_weights``; ``head_mask (num_layers, num_heads)`` as in GPT."""
        c, owner = self.config, type(self).__name__
        check_decoder_inputs(owner, idx, targets, None, c.vocab_size, c.context_length)
        if head_mask is not None:
            check_head_mask(head_mask, (c.num_layers, c.num_heads), owner)
        x = self.pos_emb(self.tok_emb(idx))
        attentions = []
        for i, block in enumerate(self.blocks):
            x = block(x, return_weights, None if head_mask is None else head_mask[i])
            if return_weights:
                x, w = x
                attentions.append(w)
        logits = self.head(self.ln_f(x))
        loss = None if targets is None else F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        return CausalLMOutput(logits, loss, tuple(attentions) if return_weights else None)
