"""Layer normalisation (Ba et al., 2016), written out.

    LayerNorm(x) = γ · (x − μ) / √(σ² + ε) + β

μ and σ² are the mean and the *biased* variance (divide by D, not D − 1) over the last dim, as in
``torch.nn.LayerNorm``; the parameters are named ``weight`` (γ) and ``bias`` (β) like torch's, so the
two load each other's state dicts.

:meth:`LayerNorm.formula` is the formula as written; ``forward`` runs torch's fused kernel
(one pass instead of five) unless ``fused=False``. The tests prove the two equal.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnlab.arguments import check_positive_int


class LayerNorm(nn.Module):
    """Normalise each token vector over its features: ``(..., D)`` -> ``(..., D)``.

    Args:
        d_model: the feature size D.
        eps: added to the variance so that a constant vector does not divide by 0
            (1e-5 in torch and GPT-2, 1e-12 in BERT).
        bias: learn β (GPT-2 and BERT do).
        fused: compute with torch's fused kernel (same result); False runs :meth:`formula`.
    """

    def __init__(self, d_model: int, eps: float = 1e-5, bias: bool = True, fused: bool = True) -> None:
        super().__init__()
        check_positive_int("LayerNorm", "d_model", d_model)
        if not isinstance(eps, int | float) or not eps > 0:
            raise ValueError(f"LayerNorm: eps must be a float > 0, got {eps!r}")
        self.d_model, self.eps, self.fused = d_model, float(eps), fused
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model)) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        if x.shape[-1] != self.d_model:
            raise ValueError(f"LayerNorm: x must have last dim {self.d_model}, got shape {tuple(x.shape)}")
        if self.fused:
            # torch.layer_norm is what F.layer_norm calls, less a Python frame per call (a decoding step has many)
            return torch.layer_norm(x, (self.d_model,), self.weight, self.bias, self.eps)
        return self.formula(x)

    def formula(self, x: Tensor) -> Tensor:
        """γ · (x − μ) / √(σ² + ε) + β, written out."""
        mean = x.mean(dim=-1, keepdim=True)
        var = (x - mean).pow(2).mean(dim=-1, keepdim=True)  # biased: divide by D
        out = (x - mean) * torch.rsqrt(var + self.eps) * self.weight
        return out if self.bias is None else out + self.bias

    def extra_repr(self) -> str:
        return f"{self.d_model}, eps={self.eps}, bias={self.bias is not None}"
