"""An inference fast path for linear maps: the weight is re-laid-out ("packed") once for oneDNN,
torch's CPU deep-learning kernel library, and the activation after it runs inside the same kernel.

``torch.nn.Linear`` on CPU calls a BLAS ``addmm``, which re-reads the weight in its plain layout at
every call; oneDNN's packed layout and fused post-op save that work (on some CPUs the BLAS is also
far slower than oneDNN). The result equals ``F.linear`` to float32 rounding, and the tests check it.

The packed path runs only for float32 CPU inputs under ``torch.no_grad``/``inference_mode`` in eval
mode; otherwise (training, autograd, other dtypes or devices) :class:`PackedLinear` is a plain
``nn.Linear``. The packed weight is rebuilt whenever the weight changes (its version counter moves).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.fast.twins import twin_of
from attnlab.layers.feedforward import activate

_POST_OPS = {"none": ("none", ""), "relu": ("relu", ""), "gelu": ("gelu", "none"), "gelu_tanh": ("gelu", "tanh")}


def onednn_available() -> bool:
    """Whether this torch build has oneDNN's linear kernel (``torch.ops.mkldnn._linear_pointwise``)."""
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


class PackedLinear(nn.Linear):
    """``activation(x Wᵀ + b)`` with a pre-packed weight at inference; an ``nn.Linear`` otherwise.

    Same parameters and state-dict names as ``nn.Linear``. ``activation`` (``"none"``, ``"relu"``,
    ``"gelu"``, ``"gelu_tanh"``) is applied on both paths, fused into the kernel on the packed one.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, activation: str = "none",
                 device=None, dtype=None) -> None:
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        if activation not in _POST_OPS:
            raise ValueError(f"PackedLinear: activation must be one of {sorted(_POST_OPS)}, got {activation!r}")
        self.activation = activation
        self._packed: tuple[tuple[int, int], Tensor] | None = None

    @classmethod
    def from_linear(cls, linear: nn.Linear, activation: str = "none") -> PackedLinear:
        """A PackedLinear sharing ``linear``'s parameters (no copy)."""
        new = twin_of(cls, linear)
        new.activation, new._packed = activation, None
        return new

    def _use_packed(self, x: Tensor) -> bool:
        # a weight made under inference_mode keeps no version counter: a packed copy could not tell it was changed
        return (not self.training and not torch.is_grad_enabled() and x.dtype == torch.float32
                and self.weight.dtype == torch.float32 and x.device.type == "cpu" and not self.weight.is_meta
                and not self.weight.is_inference() and onednn_available())

    def packed_weight(self) -> Tensor:
        key = (self.weight.data_ptr(), self.weight._version)
        if self._packed is None or self._packed[0] != key:
            with torch.no_grad():
                self._packed = (key, torch.ops.mkldnn._reorder_linear_weight(self.weight.detach()))
        return self._packed[1]

    def forward(self, x: Tensor) -> Tensor:
        if self._use_packed(x):
            attr, algorithm = _POST_OPS[self.activation]
            return torch.ops.mkldnn._linear_pointwise(x, self.packed_weight(), self.bias, attr, [], algorithm)
        y = F.linear(x, self.weight, self.bias)
        return y if self.activation == "none" else activate(y, self.activation)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, activation={self.activation!r}"
