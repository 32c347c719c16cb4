"""Half-precision inputs, single-precision arithmetic: how the backends that compute the scores in PyTorch ops keep
bfloat16 and float16 as accurate as torch's own kernels.

A bfloat16 score keeps 8 bits of mantissa: a score near 4 is rounded to a multiple of 1/64, which moves its weight
by up to 1.6 %, and an online softmax that sums its denominators in bfloat16 loses more at every block. torch's
fused kernels keep scores and running sums in float32, and its math kernel computes a bfloat16 or float16 call
in float32 (unless ``torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(True)``). :func:`in_float32` does the
same for ``"math"`` and ``"chunked"``: measured against a float64 reference, their bfloat16 errors were up to 5×
torch's before it (``tests/functional/test_precision.py`` holds them to 2×).

Speed is the other reason: on the CPU, torch's fused kernel differentiates bfloat16 attention over few keys slower
than float32, so a training call there is computed in float32 too (:func:`float32_for_cpu_backward`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch import Tensor

#: the floating dtypes computed in float32
HALF = (torch.float16, torch.bfloat16)

#: Below this many keys a half-precision call to torch's fused kernel that will be differentiated on the CPU is
#: computed in float32: its bfloat16 forward + backward took 1.36-2.48x as long as the same call cast to float32 and
#: back at 64-128 keys (head_dim 32 and 64), 0.89-1.14x at 256 and 0.74-0.81x from 512 on
#: (``benchmarks/results/half_backward.md``). The baby preset's compiled step under ``--dtype bf16`` spent 15.8 ms in it
#: (profiled), against 2.6 ms in float32.
CPU_HALF_BACKWARD_FLOAT32_BELOW = 256

#: a backend's ``run``: ``(query, key, value, *rest) -> (output, weights or None)``
KernelRun = Callable[..., tuple[Tensor, Tensor | None]]


def low_precision(query: Tensor) -> torch.dtype | None:
    """The dtype the call's result is in when that is a half type: the query's, or autocast's for a float32 query
    under autocast on its device (where the matmuls would round to it); None otherwise."""
    if query.dtype in HALF:
        return query.dtype
    device = query.device.type
    if query.dtype == torch.float32 and torch.is_autocast_enabled(device):
        dtype = torch.get_autocast_dtype(device)
        return dtype if dtype in HALF else None
    return None


def in_float32(run: KernelRun) -> KernelRun:
    """A backend's ``run`` (``(query, key, value, *rest) -> (output, weights or None)``) computed in float32, with
    autocast off, where :func:`low_precision` names a half dtype; its output and weights are returned in that
    dtype. Gradients flow through the casts."""

    @functools.wraps(run)
    def wrapped(query: Tensor, key: Tensor, value: Tensor, *rest) -> tuple[Tensor, Tensor | None]:
        dtype = low_precision(query)
        if dtype is None:
            return run(query, key, value, *rest)
        with torch.autocast(query.device.type, enabled=False):
            output, weights = run(query.float(), key.float(), value.float(), *rest)
        return output.to(dtype), None if weights is None else weights.to(dtype)

    return wrapped


def float32_for_cpu_backward(run: KernelRun) -> KernelRun:
    """A backend's ``run`` computed in float32 (:func:`in_float32`) where the call is in a half dtype, on a CPU, over
    fewer than :data:`CPU_HALF_BACKWARD_FLOAT32_BELOW` keys, and will be differentiated; as it is otherwise. What was
    measured slower is forward + backward; a call without gradients keeps torch's half-precision kernel."""
    through_float32 = in_float32(run)

    @functools.wraps(run)
    def wrapped(query: Tensor, key: Tensor, value: Tensor, *rest) -> tuple[Tensor, Tensor | None]:
        training = torch.is_grad_enabled() and (query.requires_grad or key.requires_grad or value.requires_grad)
        if training and query.device.type == "cpu" and key.shape[-2] < CPU_HALF_BACKWARD_FLOAT32_BELOW:
            return through_float32(query, key, value, *rest)
        return run(query, key, value, *rest)

    return wrapped
