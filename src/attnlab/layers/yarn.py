"""YaRN (Peng et al., 2023, "YaRN: Efficient Context Window Extension of Large Language Models", arXiv:2309.00071):
RoPE's frequencies stretched band by band, and the attention sharpened to make up for it.

With ``d = head_dim``, ``L₀ = original_context_length`` and a frequency θ_i = base^(−2i/d) turning
``r_i = L₀ · θ_i / 2π`` times over the trained length:

* a pair that turns many times (``r_i > beta_fast``, 32 by default) keeps its frequency: it sees only short
  distances, and those do not change with a longer context (extrapolation);
* a pair that turns less than ``beta_slow`` (1) times has it divided by ``factor`` (interpolation, as ``linear``);
* between the two, a linear ramp over the pair index blends the two frequencies.

The ramp's ends are the pair indices where ``r_i`` equals ``beta_fast`` and ``beta_slow``:
``d · ln(L₀ / (2π · β)) / (2 ln base)``, rounded outward when ``truncate``. The cos and sin are then multiplied by
the "attention factor" ``0.1 · ln(factor) + 1`` (the paper's √(1/t), §3.4): scores grow by its square, which keeps
the softmax as sharp over the longer context as it was over the trained one.

Every step is the arithmetic of transformers' ``_compute_yarn_parameters`` (float32, the same order), so the two
give the same frequencies to the last bit.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor


def _mscale(scale: float, mscale: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def yarn_attention_factor(s: Any) -> float:
    """The factor cos and sin are multiplied by: ``s.attention_factor`` if given, else from ``factor`` (and
    DeepSeek's ``mscale`` / ``mscale_all_dim`` where both are given)."""
    if s.attention_factor is not None:
        return float(s.attention_factor)
    if s.mscale and s.mscale_all_dim:
        return float(_mscale(s.factor, s.mscale) / _mscale(s.factor, s.mscale_all_dim))
    return _mscale(s.factor)


def _correction_dim(rotations: float, dim: int, base: float, length: int) -> float:
    """The pair index whose frequency turns ``rotations`` times over ``length`` positions."""
    return (dim * math.log(length / (rotations * 2 * math.pi))) / (2 * math.log(base))


def yarn_inv_freq(base: float, dim: int, s: Any, device: torch.device | str | None = None) -> Tensor:
    """The ``dim / 2`` YaRN frequencies, float32, for scaling ``s`` (a :class:`~attnlab.layers.RopeScaling`)."""
    low = _correction_dim(s.beta_fast, dim, base, s.original_context_length)
    high = _correction_dim(s.beta_slow, dim, base, s.original_context_length)
    if s.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # a ramp of width 0 would divide by 0
    pos_freqs = base ** (torch.arange(0, dim, 2, device=device).float() / dim)
    extrapolation, interpolation = 1.0 / pos_freqs, 1.0 / (s.factor * pos_freqs)
    ramp = ((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1).to(device)
    keep = 1 - ramp  # 1: the pair keeps its frequency (fast), 0: divided by factor (slow)
    return interpolation * (1 - keep) + extrapolation * keep
