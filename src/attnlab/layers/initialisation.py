"""GPT-2/BERT-style initialisation: every weight N(0, 0.02²), biases 0, LayerNorm left at γ=1, β=0."""

from __future__ import annotations

from torch import nn

from attnlab.layers.positional import LearnedPositionalEmbedding

STD = 0.02


def init_weights(module: nn.Module) -> None:
    """For ``model.apply``: a small normal init keeps early activations and logits near zero."""
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, mean=0.0, std=STD)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding | LearnedPositionalEmbedding):
        nn.init.normal_(module.weight, mean=0.0, std=STD)
