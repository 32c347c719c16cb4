"""Masks, in PyTorch's convention: a bool mask is True where a query *may* attend a key;
a float mask is *added* to the scores (0 to keep, -inf to forbid)."""

from __future__ import annotations

import numpy as np


def causal_mask(t_q: int, t_k: int | None = None) -> np.ndarray:
    """Bool ``(Tq, Tk)`` mask, True where key j <= query i (top-left aligned, like torch's ``is_causal``).

    Example:
        >>> causal_mask(3).astype(int)
        array([[1, 0, 0],
               [1, 1, 0],
               [1, 1, 1]])
    """
    t_k = t_q if t_k is None else t_k
    for name, n in (("t_q", t_q), ("t_k", t_k)):
        if not isinstance(n, int | np.integer) or isinstance(n, bool) or n < 1:
            raise ValueError(f"causal_mask: {name} must be a positive int, got {n!r}")
    return np.tri(t_q, t_k, dtype=bool)


def padding_mask(attention_mask: np.ndarray) -> np.ndarray:
    """Turn a ``(B, T)`` padding mask (1 = real token, 0 = padding) into a bool key mask ``(B, 1, 1, T)``.

    Example:
        >>> padding_mask(np.array([[1, 1, 0]])).shape
        (1, 1, 1, 3)
    """
    if not isinstance(attention_mask, np.ndarray):
        raise TypeError(f"attention_mask must be a numpy.ndarray, got {type(attention_mask).__name__}")
    if attention_mask.ndim != 2:
        raise ValueError(
            "attention_mask must have shape (B, T) with 1 for real tokens and 0 for padding, got shape "
            f"{attention_mask.shape}"
        )
    if attention_mask.dtype != np.bool_:
        if not np.issubdtype(attention_mask.dtype, np.integer):
            raise TypeError(f"attention_mask must be bool or integer 0/1, got dtype {attention_mask.dtype}")
        bad = (attention_mask != 0) & (attention_mask != 1)
        if bad.any():
            raise ValueError(f"attention_mask must contain only 0 and 1, got {np.unique(attention_mask[bad]).tolist()}")
        attention_mask = attention_mask.astype(bool)
    return attention_mask[:, None, None, :]
