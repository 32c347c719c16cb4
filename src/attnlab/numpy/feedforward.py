"""The position-wise feed-forward network ("Attention Is All You Need", §3.3), the twin of
:class:`attnlab.layers.FeedForward`:  FFN(x) = act(x W₁ + b₁) W₂ + b₂, parameters
``linear1`` and ``linear2`` as the torch module names them."""

from __future__ import annotations

import math

import numpy as np

from attnlab.numpy.linear import linear_from
from attnlab.numpy.weights import Params

ACTIVATIONS = ("relu", "gelu", "gelu_tanh")

# Abramowitz & Stegun 7.1.26: erf(x) ≈ 1 − (a₁t + … + a₅t⁵) e^(−x²), t = 1/(1 + p x), x ≥ 0;
# absolute error ≤ 1.5e-7, well under fp32 parity (NumPy has no erf, and the twin needs only NumPy).
_P = 0.3275911
_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def erf(x: np.ndarray) -> np.ndarray:
    """The error function, elementwise (computed in float64, returned in ``x``'s dtype)."""
    z = np.abs(x.astype(np.float64))
    t = 1.0 / (1.0 + _P * z)
    poly = t * (_A[0] + t * (_A[1] + t * (_A[2] + t * (_A[3] + t * _A[4]))))
    return (np.sign(x) * (1.0 - poly * np.exp(-z * z))).astype(x.dtype)


def gelu(x: np.ndarray) -> np.ndarray:
    """Exact GELU (BERT): ``x · Φ(x) = x/2 · (1 + erf(x/√2))``."""
    return x * (x.dtype.type(0.5) * (1.0 + erf(x * x.dtype.type(1 / math.sqrt(2.0)))))


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """GPT-2's GELU: ``x/2 · (1 + tanh(√(2/π) (x + 0.044715 x³)))``."""
    c = x.dtype.type(math.sqrt(2.0 / math.pi))
    return x.dtype.type(0.5) * x * (1.0 + np.tanh(c * (x + x.dtype.type(0.044715) * x**3)))


def activate(x: np.ndarray, activation: str) -> np.ndarray:
    if activation == "relu":
        return np.maximum(x, x.dtype.type(0.0))
    if activation == "gelu":
        return gelu(x)
    if activation == "gelu_tanh":
        return gelu_tanh(x)
    raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")


def feed_forward(x: np.ndarray, params: Params, activation: str = "gelu") -> np.ndarray:
    """``(..., D)`` -> ``(..., D)`` through the hidden width of ``linear1``."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"feed_forward: activation must be one of {ACTIVATIONS}, got {activation!r}")
    return linear_from(params, "linear2", activate(linear_from(params, "linear1", x, "feed_forward"), activation),
                       "feed_forward")
