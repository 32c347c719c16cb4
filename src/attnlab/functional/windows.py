"""Sliding-window causal attention (Mistral 7B, Jiang et al., 2023, arXiv:2310.06825; Longformer before it).

Each query sees only the last ``window`` positions up to and including its own, so a layer's cost grows with
T · window instead of T², and the KV cache never needs more than ``window`` entries. Stacked layers still pass
information further back: after k layers a token can depend on about k · window earlier ones.

How ``window`` counts: with window W, the query at position p sees keys p − W + 1 .. p, that is W keys counting
itself (W = 1: only itself). This is Mistral's ``sliding_window`` as transformers applies it (its
``sliding_window_causal_mask_function`` keeps key j for query p when ``j > p − W`` and ``j <= p``); the tests
check the two masks agree.

Alignment: keys are positions 0..Tk−1 and the Tq queries are the *last* Tq of them, query i at position
``Tk − Tq + i``, as in decoding with a KV cache. With Tq < Tk this differs from :func:`causal_mask` (and from
SDPA's ``is_causal=True``), which align the queries to the *start*.
"""

from __future__ import annotations

import torch
from torch import Tensor

from attnlab.arguments import check_positive_int


def sliding_window_mask(t_q: int, t_k: int, window: int, device: torch.device | str | None = None) -> Tensor:
    """Bool ``(Tq, Tk)`` mask, True where query i may attend key j: ``p_i − window < j <= p_i``, p_i = Tk − Tq + i.

    Pass it as ``attn_mask`` (True = may attend, PyTorch's convention); it already contains the causal mask.

    Example:
        >>> sliding_window_mask(4, 4, window=2).int()
        tensor([[1, 0, 0, 0],
                [1, 1, 0, 0],
                [0, 1, 1, 0],
                [0, 0, 1, 1]], dtype=torch.int32)
    """
    for name, n in (("t_q", t_q), ("t_k", t_k)):
        check_positive_int("sliding_window_mask", name, n)
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValueError(f"sliding_window_mask: window must be an int >= 1 (keys seen, own included), got {window!r}")
    if t_q > t_k:
        raise ValueError(
            f"sliding_window_mask: t_q must be <= t_k (the queries are the last t_q key positions), got t_q={t_q}, "
            f"t_k={t_k}"
        )
    q_pos = torch.arange(t_k - t_q, t_k, device=device)[:, None]  # (Tq, 1)
    k_pos = torch.arange(t_k, device=device)  # (Tk,)
    return (k_pos <= q_pos) & (k_pos > q_pos - window)
