"""ALiBi, attention with linear biases (Press, Smith & Lewis, 2022, "Train Short, Test Long", arXiv:2108.12409).

No position vectors at all: each head h adds ``−m_h · distance`` to its scores, so far keys are penalised linearly,
and each head looks at a different scale, from sharply local (m = 1/2) to almost flat (m = 1/256 with 8 heads).

    scores[h, i, j] += −m_h · (p_i − j)        p_i: the position of query i

The slopes are geometric (paper §3): with n heads, ``m_k = 2^(−8k/n)`` for k = 1..n, so 8 heads get
1/2, 1/4, …, 1/256. For n not a power of two the authors' rule (their released code; BLOOM's is the same) takes
the n' = 2^⌊log₂ n⌋ slopes of the closest lower power of two, then the first n − n' of every other slope of
2n' heads (those with odd k).

Alignment: keys are positions 0..Tk−1 and the Tq queries are the *last* Tq of them, query i at position
``p_i = Tk − Tq + i``, as in causal decoding with a KV cache (one new query sees all the cached keys). With
Tq = Tk this is the plain ``i − j``. Keys after the query get a positive bias (the distance is signed): they are
meant to be masked, as in a causal model; the signed form is what makes this equal, up to a constant per row
(which softmax ignores), to the ``m · j`` that the paper's and BLOOM's code add.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from attnlab.arguments import check_positive_int


def _check_heads(num_heads: int, owner: str) -> None:
    check_positive_int(owner, "num_heads", num_heads)


def _geometric(n: int) -> list[float]:
    """The n slopes 2^(−8k/n), k = 1..n, of a power-of-two head count n."""
    return [2.0 ** (-8.0 * k / n) for k in range(1, n + 1)]


def alibi_slopes(num_heads: int) -> Tensor:
    """The ``(num_heads,)`` float32 slopes m_h, largest first.

    Example:
        >>> alibi_slopes(4)                          # 2^-2, 2^-4, 2^-6, 2^-8
        tensor([0.2500, 0.0625, 0.0156, 0.0039])
    """
    _check_heads(num_heads, "alibi_slopes")
    lower = 2 ** math.floor(math.log2(num_heads))  # the closest power of two <= num_heads
    slopes = _geometric(lower) + _geometric(2 * lower)[0::2][: num_heads - lower]
    return torch.tensor(slopes, dtype=torch.float32)


def alibi_bias(num_heads: int, t_q: int, t_k: int, device: torch.device | str | None = None, *,
               dtype: torch.dtype = torch.float32) -> Tensor:
    """The ``(H, Tq, Tk)`` bias ``−m_h · (p_i − j)`` to add to the scores, queries aligned to the end of the keys.

    Pass it (broadcast over the batch) as a float ``attn_mask``; combine it with a causal mask by setting the
    forbidden entries to −inf. ``dtype`` should be the queries' (PyTorch's SDPA wants a float mask of that dtype).

    Example:
        >>> alibi_bias(1, 1, 4)[0]                   # one new query at position 3, slope 1/256
        tensor([[-0.0117, -0.0078, -0.0039,  0.0000]])
    """
    _check_heads(num_heads, "alibi_bias")
    for name, n in (("t_q", t_q), ("t_k", t_k)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"alibi_bias: {name} must be a positive int, got {n!r}")
    if t_q > t_k:
        raise ValueError(
            f"alibi_bias: t_q must be <= t_k (the queries are the last t_q key positions), got t_q={t_q}, t_k={t_k}"
        )
    q_pos = torch.arange(t_k - t_q, t_k, device=device)[:, None]
    minus_distance = (torch.arange(t_k, device=device) - q_pos).float()  # (Tq, Tk): j − p_i, signed
    return (alibi_slopes(num_heads).to(device)[:, None, None] * minus_distance).to(dtype)
