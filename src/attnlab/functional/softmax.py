"""A numerically stable softmax that also survives rows with nothing to attend to."""

from __future__ import annotations

import torch
from torch import Tensor


def softmax(x: Tensor, dim: int = -1) -> Tensor:
    """softmax(x)_i = exp(x_i - max x) / sum_j exp(x_j - max x), along ``dim``.

    Subtracting the row maximum first is what makes it stable: ``exp`` never
    sees a large positive number, so it cannot overflow to ``inf``. It changes
    nothing mathematically, because softmax is invariant to adding a constant.

    A row that is entirely ``-inf`` (a query that may attend to nothing) gives
    all zeros instead of the ``NaN`` that ``torch.softmax`` returns, and its
    gradient is zero as well.

    Example:
        >>> softmax(torch.tensor([1.0, 2.0, 3.0]))
        tensor([0.0900, 0.2447, 0.6652])
    """
    if not torch.is_floating_point(x):
        raise TypeError(f"softmax: x must be a floating-point tensor, got dtype {x.dtype}")
    # The shift is a constant for the gradient (softmax ignores it), so detach it.
    shift = x.detach().amax(dim=dim, keepdim=True)
    shift = shift.masked_fill(~torch.isfinite(shift), 0.0)
    e = torch.exp(x - shift)
    total = e.sum(dim=dim, keepdim=True)
    # All -inf rows have total 0; divide by 1 there so the row stays 0 (and so does its gradient).
    return e / total.masked_fill(total == 0, 1.0)
