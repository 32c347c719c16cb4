"""The linear map ``y = x Wᵀ + b`` with a faster product for the few rows of a decoding step on a CPU.

Decoding one token per sequence multiplies every weight matrix by a handful of rows, so a step's speed is the
speed at which the weights stream from memory. torch's product for one such row read fp32 weights at about half
the speed of a plain sum on the 2-core AMD EPYC machines attnlab is measured on; attnlab's kernel
(``fast/kernels/fp32_linear.cpp``) reads them about as fast as the sum (benchmarks/results/linear.md).
:func:`linear` sends a call there only when it is the same map: fp32 tensors on the CPU, at most
:data:`KERNEL_ROWS` rows, nothing for autograd to record, no autocast, the kernels loaded; everything else goes to
``F.linear``. ``torch.compile`` calls the kernel too (an opaque op with a shape function). The two differ by
rounding only (the sums run in another order; tested within 1e-5).

:class:`FastLinear` is ``nn.Linear`` with this product: the same parameters, state dict and initialisation.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.fast.kernels import READY
from attnlab.fast.twins import twin_of

#: rows of x up to which the kernel runs (a decoding batch); more rows are a prompt or training, where torch's
#: blocked matrix product (which reuses each weight for many rows) is the faster one
KERNEL_ROWS = 8

_PLAIN = (Tensor, nn.Parameter)  # not a DTensor or other subclass, whose own dispatch must run


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``F.linear(x, weight, bias)``: ``x (..., d_in)``, ``weight (d_out, d_in)``, ``bias (d_out,)`` ->
    ``(..., d_out)``; by attnlab's CPU kernel where it is the same map: the kernels loaded, at most
    :data:`KERNEL_ROWS` rows, nothing for autograd to record, plain fp32 CPU tensors, no autocast."""
    if (READY[0] and x.numel() <= KERNEL_ROWS * weight.shape[-1]
            and not (torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad
                                                  or (bias is not None and bias.requires_grad)))
            and type(x) in _PLAIN and x.dtype == torch.float32 and x.is_cpu
            and type(weight) in _PLAIN and weight.dtype == torch.float32 and weight.is_cpu
            and (bias is None or (type(bias) in _PLAIN and bias.dtype == torch.float32 and bias.is_cpu))
            and x.dim() >= 1 and x.shape[-1] == weight.shape[-1] and weight.is_contiguous()
            and not torch.is_autocast_enabled("cpu")):  # the common answers (a prompt, training) come first
        return torch.ops.attnlab_cpu.fp32_linear.default(x, weight, bias)
    return F.linear(x, weight, bias)


class FastLinear(nn.Linear):
    """``nn.Linear`` whose product is :func:`linear`: ``(..., in_features)`` -> ``(..., out_features)``."""

    def forward(self, x: Tensor) -> Tensor:
        return linear(x, self.weight, self.bias)

    @classmethod
    def from_linear(cls, module: nn.Linear) -> FastLinear:
        """A FastLinear sharing ``module``'s parameters (no copy)."""
        return twin_of(cls, module)
