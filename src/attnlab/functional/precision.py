"""Half-precision inputs, single-precision arithmetic: how the backends that compute the scores in PyTorch ops keep
bfloat16 and float16 as accurate as torch's own kernels.

A bfloat16 score keeps 8 bits of mantissa: a score near 4 is rounded to a multiple of 1/64, which moves its weight
by up to 1.6 %, and an online softmax that sums its denominators in bfloat16 loses more at every block. torch's
fused kernels keep scores and running sums in float32, and its math kernel computes a bfloat16 or float16 call
in float32 (unless ``torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(True)``). :func:`in_float32` does the
same for ``"math"`` and ``"chunked"``: measured against a float64 reference, their bfloat16 errors were up to 5×
torch's before it (``tests/functional/test_precision.py`` holds them to 2×).

"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch import Tensor

#: the floating dtypes computed in float32
HALF = (torch.float16, torch.bfloat16)

#: a backend's ``run``: ``(query, key, value, **options) -> (output, weights or None)``
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
    """A backend's ``run`` (``(query, key, value, **options) -> (output, weights or None)``) computed in float32, with
    autocast off, where :func:`low_precision` names a half dtype; its output and weights are returned in that
    dtype. Gradients flow through the casts."""

    @functools.wraps(run)
    def wrapped(query: Tensor, key: Tensor, value: Tensor, **options) -> tuple[Tensor, Tensor | None]:
        dtype = low_precision(query)
        if dtype is None:
            return run(query, key, value, **options)
        with torch.autocast(query.device.type, enabled=False):
            output, weights = run(query.float(), key.float(), value.float(), **options)
        return output.to(dtype), None if weights is None else weights.to(dtype)

    return wrapped
