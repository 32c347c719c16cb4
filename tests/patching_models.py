"""Small random models of every kind patching takes, with weights of order one (an initialisation's small weights
make every logit nearly 0, and a comparison that passes on zeros proves nothing), and inputs for them."""

from __future__ import annotations

import torch
from torch import nn

from attnlab.heads.attention_only import AttentionOnlyConfig, AttentionOnlyTransformer
from attnlab.models import GPT, GPTConfig, ModernDecoder, ModernDecoderConfig, Transformer, TransformerConfig

VOCAB = 40
KINDS = ("gpt", "modern", "attention-only", "translation")


def order_one(model: nn.Module, seed: int) -> nn.Module:
    """Matrices N(0, 1/fan_in), vectors of ones (gains) 1 + N(0, 0.2²), other vectors N(0, 0.1²); eval mode."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            noise = torch.randn(p.shape, generator=g)
            if p.dim() >= 2:
                p.copy_(noise / p.shape[-1] ** 0.5)
            elif bool((p == 1).all()):
                p.copy_(1 + 0.2 * noise)
            else:
                p.copy_(0.1 * noise)
    return model.eval()


def make(kind: str, seed: int = 0, **overrides) -> nn.Module:
    """A random model of ``kind``: a GPT (2 layers × 2 heads), a ModernDecoder (4 query heads over 2 key/value heads,
    RoPE, RMSNorm, SwiGLU), the attention-only model (2 × 4), a translation model (2 + 2 layers × 4 heads)."""
    torch.manual_seed(seed)
    if kind == "gpt":
        model = GPT(GPTConfig.from_preset("tiny", vocab_size=VOCAB, **overrides))
    elif kind == "modern":
        model = ModernDecoder(ModernDecoderConfig.from_preset("tiny", vocab_size=VOCAB, **overrides))
    elif kind == "attention-only":
        model = AttentionOnlyTransformer(AttentionOnlyConfig(VOCAB, 16, 16, 2, 4, **overrides))
    else:
        model = Transformer(TransformerConfig.from_preset("transformer-tiny", vocab_size=VOCAB, dropout=0.0,
                                                          context_length=16, **overrides))
    return order_one(model, seed)


def inputs(kind: str, seed: int, batch: int = 3, length: int = 7):
    """A clean and a corrupted input for ``kind``: ids ``(B, T)``; a translation model's are (source, target) pairs
    whose targets agree (the source's second half is re-drawn)."""
    g = torch.Generator().manual_seed(seed)
    if kind == "translation":
        source = torch.randint(3, VOCAB, (batch, length + 2), generator=g)
        target = torch.randint(3, VOCAB, (batch, length), generator=g)
        target[:, 0] = 1  # <bos>
        other = source.clone()
        other[:, (length + 2) // 2:] = torch.randint(3, VOCAB, (batch, length + 2 - (length + 2) // 2), generator=g)
        return (source, target), (other, target)
    clean = torch.randint(0, VOCAB, (batch, length), generator=g)
    corrupt = clean.clone()
    corrupt[:, :-1] = torch.randint(0, VOCAB, (batch, length - 1), generator=g)
    return clean, corrupt


def logit_difference(logits: torch.Tensor) -> torch.Tensor:
    """logit(5) − logit(7) at the last position, averaged over the batch."""
    return (logits[:, -1, 5] - logits[:, -1, 7]).mean()
