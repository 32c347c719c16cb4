"""The backends of :func:`~attnlab.functional.scaled_dot_product_attention`, and the rule ``"auto"`` follows.

The rule is a pure function of plain facts about the call (:class:`AttentionCall`), so it is tested without
any particular device, and it is the only place that decides. The table in ``docs/attention.md`` is this rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

Backend = Literal["auto", "math", "sdpa", "chunked"]
#: every backend name, in one place: configs, the CLI and the checks read it from here
BACKENDS: tuple[str, ...] = get_args(Backend)

# torch's fused CPU kernel has no dropout: with dropout it falls back to its O(T²) math kernel. From this many
# scores per head on, "auto" takes our chunked kernel instead, whose memory stays O(T).
DROPOUT_CHUNKED_FROM = 1024 * 1024


@dataclass(frozen=True)
class AttentionCall:
    """What the ``"auto"`` rule looks at: the facts of one call, nothing else.

    Attributes:
        device: ``"cpu"``, ``"cuda"``, ... (``tensor.device.type``).
        t_q, t_k: number of queries and keys.
        dropout: whether dropout is on (``dropout_p > 0``).
        return_weights: whether the weights ``(..., Tq, Tk)`` are wanted.
    """

    device: str
    t_q: int
    t_k: int
    dropout: bool = False
    return_weights: bool = False


def choose_backend(call: AttentionCall) -> str:
    """What ``backend="auto"`` runs: the fastest backend that can do what was asked.

    - weights wanted: ``"math"``, the only backend that materialises them;
    - one query on the CPU (decoding with a KV cache): ``"math"``, two small matmuls, far cheaper than setting
      up the fused kernel;
    - dropout on the CPU with ``Tq·Tk ≥ 2²⁰``: ``"chunked"`` (torch's kernel would fall back to O(T²) memory);
    - otherwise ``"sdpa"``, torch's fused kernel (it does dropout itself on CUDA).
    """
    if call.return_weights:
        return "math"
    if call.device == "cpu" and call.t_q == 1:
        return "math"
    if call.device == "cpu" and call.dropout and call.t_q * call.t_k >= DROPOUT_CHUNKED_FROM:
        return "chunked"
    return "sdpa"
