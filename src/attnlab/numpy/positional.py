"""Sinusoidal positions ("Attention Is All You Need", §3.5), the twin of
:func:`attnlab.layers.sinusoidal_table`:

    PE(pos, 2i) = sin(pos / 10000^(2i/d)),   PE(pos, 2i+1) = cos(pos / 10000^(2i/d))
"""

from __future__ import annotations

import math

import numpy as np

from attnlab.arguments import check_positive_int
from attnlab.numpy.checks import check_float_array


def sinusoidal_table(context_length: int, d_model: int) -> np.ndarray:
    """The ``(context_length, d_model)`` table, computed in float64 then cast to float32; ``d_model`` even.

    Example:
        >>> sinusoidal_table(2, 4)[0].tolist()          # position 0: sin 0 = 0, cos 0 = 1
        [0.0, 1.0, 0.0, 1.0]
    """
    for name, n in (("context_length", context_length), ("d_model", d_model)):
        check_positive_int("sinusoidal_table", name, n)
    if d_model % 2:
        raise ValueError(f"sinusoidal_table: d_model must be even (sin/cos pairs), got {d_model}")
    pos = np.arange(context_length, dtype=np.float64)[:, None]  # (context_length, 1)
    inv_freq = np.exp(np.arange(0, d_model, 2, dtype=np.float64) * (-math.log(10000.0) / d_model))
    pe = np.empty((context_length, d_model), dtype=np.float64)
    pe[:, 0::2] = np.sin(pos * inv_freq)
    pe[:, 1::2] = np.cos(pos * inv_freq)
    return pe.astype(np.float32)


def add_sinusoidal_positions(x: np.ndarray, offset: int = 0) -> np.ndarray:
    """``x (B, T, D)`` + the table's rows ``offset .. offset + T - 1``."""
    check_float_array(x, "x", "add_sinusoidal_positions")
    if x.ndim != 3:
        raise ValueError(f"add_sinusoidal_positions: x must have shape (B, T, D), got {x.shape}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValueError(f"add_sinusoidal_positions: offset must be an int >= 0, got {offset!r}")
    return x + sinusoidal_table(offset + x.shape[1], x.shape[2])[offset:].astype(x.dtype)
