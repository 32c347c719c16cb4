"""The feed-forward networks with the CPU's speed choices: the same arithmetic as
:class:`~attnlab.layers.SwiGLU` and :class:`~attnlab.layers.FeedForward` (subclasses sharing their parameters).

* :class:`FastSwiGLU`: at inference, ``gate_proj`` and ``up_proj`` as one product over their weights stacked once and
  kept (:func:`~attnlab.fast.projections.fused_map`).
* :class:`FastFeedForward`: the activation runs inside the first map where that map is a
  :class:`~attnlab.fast.packed.PackedLinear` holding it (oneDNN's fused post-op); and GELU's tanh form, in a graph
  ``torch.compile`` traces for the CPU, as ``x · σ(2u)`` (:func:`gelu_tanh`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from attnlab.fast.projections import fused_map
from attnlab.fast.twins import twin_of
from attnlab.layers.feedforward import FeedForward, activate, dropped
from attnlab.layers.swiglu import SwiGLU

SQRT_8_OVER_PI = (8 / math.pi) ** 0.5  # 2 · √(2/π): σ(2u) = (1 + tanh(u)) / 2


def gelu_tanh(x: Tensor) -> Tensor:
    """GELU's tanh approximation, ``0.5 · x · (1 + tanh(u))`` with ``u = √(2/π) · (x + 0.044715 · x³)``; a graph that
    ``torch.compile`` traces on the CPU gets it as ``x · σ(2u)``, the same function.

    Why two forms: eager, torch's one fused kernel for the first is the fastest (the second's five operations and
    their backward took 2.3x as long). A compiled graph is fused whatever form it is given, and there inductor's
    vectorized tanh costs about three times its exp on the AVX-512 EPYC attnlab is measured on (torch's own kernels:
    704 against 233 µs over 393,216 floats): the baby GPT's compiled training step ran 1.05-1.08x as fast with σ
    (two runs, 120 and 160 steps each, in turns: 38.3 against 41.3 ms a step, 36.3 against 38.2). The two differ by
    rounding only: values within 5e-7 of each other and of float64 over |x| ≤ 12, gradients within 3e-6 (tested).
    Only on the CPU, where it was measured to pay: a graph for a GPU keeps the form eager runs.
    """
    if torch.compiler.is_compiling() and x.device.type == "cpu":
        return x * torch.sigmoid(SQRT_8_OVER_PI * (x + 0.044715 * x * x * x))
    return F.gelu(x, approximate="tanh")


class FastSwiGLU(SwiGLU):
    """:class:`~attnlab.layers.SwiGLU` with its gate and up projections fused at inference."""

    @classmethod
    def from_module(cls, module: SwiGLU) -> FastSwiGLU:
        return twin_of(cls, module)

    def forward(self, x: Tensor) -> Tensor:
        fused = fused_map(self, self.gate_proj, self.up_proj)  # inference: one matmul, the weights kept stacked
        gate, up = (self.gate_proj(x), self.up_proj(x)) if fused is None else fused(x).chunk(2, dim=-1)
        return self.down_proj((gelu_tanh if self.activation == "gelu_tanh" else F.silu)(gate) * up)


class FastFeedForward(FeedForward):
    """:class:`~attnlab.layers.FeedForward` whose activation may run inside its first map, and whose GELU takes the
    form a compiled CPU graph runs fastest."""

    @classmethod
    def from_module(cls, module: FeedForward) -> FastFeedForward:
        return twin_of(cls, module)

    def forward(self, x: Tensor) -> Tensor:
        h = self.linear1(x)
        # else fused into linear1 (a packed map holds it); read from its __dict__, as a missing attribute would cost
        # nn.Module.__getattr__ an exception at every call
        if vars(self.linear1).get("activation") != self.activation:
            h = gelu_tanh(h) if self.activation == "gelu_tanh" else activate(h, self.activation)
        return dropped(self.dropout, self.linear2(h))
