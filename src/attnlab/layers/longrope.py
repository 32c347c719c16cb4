"""LongRoPE (Ding et al., 2024, arXiv:2402.13753), as Phi-3's long-context checkpoints use it.

Each of RoPE's D/2 frequencies gets its own stretch, found by search rather than by a formula: ``short_factor``
while the sequence fits the length the model was first trained on (L₀ = ``original_context_length``),
``long_factor`` beyond it, exactly as transformers switches between them (on the length L = max(position) + 1 of
the call):

    θ'_i = 1 / (λ_i · base^(2i/D)),     λ = short_factor if L ≤ L₀ else long_factor

and cos and sin are multiplied by the attention factor ``√(1 + ln s / ln L₀)``, ``s`` = context_length / L₀ (1
where s ≤ 1), unless the checkpoint gives ``attention_factor``: scores grow by its square, which keeps the softmax
as sharp at 128k positions as at 4k.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def longrope_inv_freq(base: float, head_dim: int, factors: tuple[float, ...], device=None) -> Tensor:
    """The D/2 frequencies, float32, each divided by its own factor."""
    if len(factors) != head_dim // 2:
        raise ValueError(f"RopeScaling: longrope needs head_dim/2 = {head_dim // 2} factors, got {len(factors)}")
    ext = torch.tensor(factors, dtype=torch.float32, device=device)
    return 1.0 / (ext * base ** (torch.arange(0, head_dim, 2, dtype=torch.int64, device=device).float() / head_dim))


def longrope_attention_factor(factor: float, original_context_length: int, given: float | None) -> float:
    """What cos and sin are multiplied by: the checkpoint's ``attention_factor``, or √(1 + ln s / ln L₀)."""
    if given is not None:
        return float(given)
    return 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(original_context_length))
