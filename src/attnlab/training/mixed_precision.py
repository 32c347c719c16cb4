"""Mixed precision for training: float32 master weights, matmuls in bfloat16 or float16 under autocast.

The weights, AdamW's moments and every checkpoint stay float32; only the forward pass and the loss run under
``torch.autocast``, which computes matmuls in the low-precision dtype and keeps reductions (softmax, norms,
the loss) in float32. The gradients reach the float32 weights in float32.

* ``bf16``: float32's range with 8 significant bits. Nothing else is needed; on CPUs it is the dtype autocast
  has fast kernels for, so CI tests it.
* ``fp16``: 11 significant bits but a range that tops out at 65,504 and loses gradients below ~6e-8, so the loss
  is multiplied by a scale before ``backward`` (``torch.amp.GradScaler``), the gradients are divided by it
  before clipping, and a step with an inf or NaN gradient is skipped and the scale halved; it doubles again
  after 2,000 clean steps. The scaler's state is saved in the checkpoint, so a resumed run goes on bit for bit.
  CUDA only: torch's CPU float16 kernels are emulated on most CPUs, many times slower than float32.
* ``fp32``: no autocast. On CUDA, float32 matmuls may use TF32 tensor cores (10-bit mantissa products, float32
  sums), for every dtype: set once when the trainer starts.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from attnlab.i18n import tr
from attnlab.models.config import DTYPES, check_dtype_name

#: the dtypes training accepts on a CPU: all but float16, which needs CUDA (see the module docstring)
CPU_DTYPES = tuple(name for name, dtype in DTYPES.items() if dtype is not torch.float16)


def allow_tf32(device: torch.device) -> None:
    """On CUDA, let float32 matmuls and convolutions use TF32 tensor cores (torch's own default is off)."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True


class MixedPrecision:
    """Autocast, the fp16 gradient scaler and TF32 for one run on one device.

    Example:
        >>> precision = MixedPrecision("bf16", torch.device("cpu"))
        >>> with precision.autocast():
        ...     loss = model(x, targets=y).loss
        >>> precision.backward(loss)
        >>> precision.step(optimizer, model.parameters(), grad_clip=1.0)
    """

    def __init__(self, dtype: str, device: torch.device) -> None:
        self.name, self.dtype, self.device = dtype, check_dtype_name(dtype), torch.device(device)
        if self.device.type == "cpu" and dtype not in CPU_DTYPES:
            raise ValueError(tr("dtype: {dtype!r} needs a CUDA device (torch's CPU float16 kernels are emulated on "
                                "most CPUs, many times slower than float32), got device cpu; on the CPU use "
                                "{cpu_dtypes}", dtype=dtype, cpu_dtypes=' or '.join(map(repr, CPU_DTYPES))))
        allow_tf32(self.device)
        self.scaler = torch.amp.GradScaler(self.device.type) if dtype == "fp16" else None

    def autocast(self) -> contextlib.AbstractContextManager:
        """The forward pass and the loss run inside this: autocast to the dtype, or nothing for fp32."""
        if self.dtype == torch.float32:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.dtype)

    def backward(self, loss: Tensor) -> None:
        """``loss.backward()``, the loss scaled first under fp16."""
        (loss if self.scaler is None else self.scaler.scale(loss)).backward()

    def step(self, optimizer: torch.optim.Optimizer, parameters: Any, grad_clip: float,
             clip: Callable[[Any, float], Any] | None = None) -> None:
        """Clip the true (unscaled) gradients to ``grad_clip`` (0: no clipping) with ``clip`` (default
        ``torch.nn.utils.clip_grad_norm_``; weights in pieces bring their own), then step the optimizer.

        Under fp16 the scaler skips a step whose gradients hold inf or NaN, and adjusts its scale.
        """
        if self.scaler is not None and grad_clip > 0:
            self.scaler.unscale_(optimizer)
        if grad_clip > 0:
            (clip or torch.nn.utils.clip_grad_norm_)(parameters, grad_clip)
        if self.scaler is None:
            optimizer.step()
            return
        self.scaler.step(optimizer)
        self.scaler.update()

    def state_dict(self) -> dict[str, Any]:
        """The scaler's state (plain numbers, for ``state.json``); empty when there is no scaler."""
        return {} if self.scaler is None else self.scaler.state_dict()

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        """Restore :meth:`state_dict`; a checkpoint without one (another dtype, or an older run) starts afresh."""
        if self.scaler is not None and state:
            self.scaler.load_state_dict(state)
