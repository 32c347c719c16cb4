"""A numerically stable softmax in NumPy that also survives rows with nothing to attend to."""

from __future__ import annotations

import numpy as np

from attnlab.numpy.checks import check_float_array


def softmax_(x: np.ndarray, dim: int = -1) -> np.ndarray:
    """In-place softmax along ``dim``: ``x`` is overwritten with the result and returned.

    In place on purpose: on the attention path ``x`` is the ``(..., Tq, Tk)`` score matrix, the
    biggest array there is, and writing over it keeps the peak to one such matrix.
    """
    shift = x.max(axis=dim, keepdims=True)
    shift[~np.isfinite(shift)] = 0.0  # an all -inf row: any finite shift will do, it stays all zeros
    x -= shift
    np.exp(x, out=x)
    total = x.sum(axis=dim, keepdims=True)
    total[total == 0] = 1.0  # all -inf rows sum to 0: divide by 1 so they stay 0, not NaN
    x *= np.reciprocal(total)  # one division per row, then a multiply per element
    return x


def softmax(x: np.ndarray, dim: int = -1) -> np.ndarray:
    """softmax(x)_i = exp(x_i - max x) / sum_j exp(x_j - max x), along ``dim`` (a new array).

    Subtracting the row maximum first means ``exp`` never sees a large positive number, so it
    cannot overflow; softmax is unchanged by adding a constant. A row that is entirely ``-inf``
    gives all zeros, like :func:`attnlab.functional.softmax`.

    Example:
        >>> softmax(np.array([1.0, 2.0, 3.0], dtype=np.float32)).round(4)
        array([0.09  , 0.2447, 0.6652], dtype=float32)
    """
    check_float_array(x, "x", "softmax")
    return softmax_(np.array(x, copy=True), dim)
