"""Root-mean-square normalisation (Zhang & Sennrich, 2019, arXiv:1910.07467), as Llama, Qwen and Mistral use it.

    RMSNorm(x) = γ · x / √(mean(x²) + ε)

LayerNorm without the mean: no centring and no β, only a rescale to unit root-mean-square, which is cheaper and
trains as well. Like Llama, the statistics are taken in float32 whatever the input's dtype, the normalised vector
is cast back to that dtype, and only then multiplied by γ (``weight``): the order matters in bf16, where it
decides which rounding the output gets, and this is the order Llama's checkpoints were trained with.

Gemma's variant, ``unit_offset=True``, stores γ − 1 (initialised at 0) and multiplies by ``1 + weight``, in float32,
before casting back (its checkpoints were trained in that order):

    RMSNorm₁₊(x) = (1 + w) · x / √(mean(x²) + ε)

:meth:`RMSNorm.formula` is the formula as written; ``forward`` normalises with torch's fused kernel
(``F.rms_norm``, one pass) unless ``fused=False``. The tests prove the two equal.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.arguments import check_positive_int


class RMSNorm(nn.Module):
    """Rescale each token vector to unit root-mean-square, then by γ: ``(..., D)`` -> ``(..., D)``.

    The parameter is named ``weight`` (γ) like ``torch.nn.RMSNorm``'s and Llama's, so their state dicts load.

    Args:
        d_model: the feature size D.
        eps: added to mean(x²) so that a zero vector does not divide by 0
            (1e-6 in LLaMA 1 and Qwen2, 1e-5 in Llama 2, Llama 3 and Mistral).
        fused: normalise with torch's fused kernel (same result); False runs :meth:`formula`.
        unit_offset: Gemma's ``(1 + weight)`` gain, weight initialised at 0, applied in float32.
    """

    def __init__(self, d_model: int, eps: float = 1e-6, fused: bool = True, unit_offset: bool = False) -> None:
        super().__init__()
        check_positive_int("RMSNorm", "d_model", d_model)
        if isinstance(eps, bool) or not isinstance(eps, int | float) or not eps > 0:
            raise ValueError(f"RMSNorm: eps must be a float > 0, got {eps!r}")
        self.d_model, self.eps, self.fused, self.unit_offset = d_model, float(eps), fused, unit_offset
        self.weight = nn.Parameter(torch.zeros(d_model) if unit_offset else torch.ones(d_model))

    def forward(self, x: Tensor) -> Tensor:
        if x.shape[-1] != self.d_model:
            raise ValueError(f"RMSNorm: x must have last dim {self.d_model}, got shape {tuple(x.shape)}")
        if not self.fused:
            return self.formula(x)
        normed = F.rms_norm(x.float(), (self.d_model,), None, self.eps)
        if self.unit_offset:  # Gemma: (1 + w) in float32, then cast; Llama: cast, then γ
            return (normed * (1.0 + self.weight.float())).to(x.dtype)
        return self.weight * normed.to(x.dtype)

    def formula(self, x: Tensor) -> Tensor:
        """γ · x / √(mean(x²) + ε), written out: statistics in float32, cast back, then γ."""
        x32 = x.float()
        return self._gain(x32 * torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + self.eps), x.dtype)

    def _gain(self, normed: Tensor, dtype: torch.dtype) -> Tensor:
        """Llama: cast, then γ; Gemma: (1 + w) in float32, then cast."""
        if self.unit_offset:
            return (normed * (1.0 + self.weight.float())).to(dtype)
        return self.weight * normed.to(dtype)

    def extra_repr(self) -> str:
        return f"{self.d_model}, eps={self.eps}" + (", unit_offset=True" if self.unit_offset else "")
