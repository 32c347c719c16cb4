"""What a faster model costs in quality, measured against the model it stands in for (quantized against fp32):
its perplexity on held-out text, and how often its greedy continuations are token for token the same.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from attnlab.generation.config import GenerationConfig
from attnlab.generation.decode import generate


@torch.inference_mode()
def perplexity(model: Any, tokens: Tensor, window: int | None = None) -> float:
    """``exp`` of the mean next-token cross-entropy of ``model`` over ``tokens (N,)``, cut into consecutive windows
    of ``window`` tokens (default: the model's ``context_length``), each predicted from its own start."""
    window = window or model.config.context_length
    total, count = 0.0, 0
    for start in range(0, tokens.numel() - 1, window):
        chunk = tokens[start : start + window + 1]
        if chunk.numel() < 2:
            break
        logits = model(chunk[None, :-1]).logits[0]
        total += F.cross_entropy(logits.float(), chunk[1:], reduction="sum").item()
        count += chunk.numel() - 1
    return math.exp(total / count)


def greedy_agreement(reference: Any, model: Any, prompts: Tensor, max_new_tokens: int) -> float:
    """The fraction of ``prompts (P, T)`` whose ``max_new_tokens`` greedy tokens from ``model`` equal, all of them,
    those from ``reference``."""
    greedy = GenerationConfig(temperature=0)
    want = generate(reference, prompts, max_new_tokens, greedy)[:, prompts.shape[1]:]
    got = generate(model, prompts, max_new_tokens, greedy)[:, prompts.shape[1]:]
    return (got == want).all(dim=1).float().mean().item()


def prompts_from(tokens: Tensor, count: int, length: int, seed: int = 0) -> Tensor:
    """``(count, length)`` prompts: windows of ``tokens (N,)`` at random starts (seeded)."""
    g = torch.Generator().manual_seed(seed)
    starts = torch.randint(0, tokens.numel() - length, (count,), generator=g)
    return torch.stack([tokens[s : s + length] for s in starts.tolist()])
