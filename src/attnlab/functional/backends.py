"""The backends of :func:`~attnlab.functional.scaled_dot_product_attention`, and the rule ``"auto"`` follows.

The rule is a pure function of plain facts about the call (:class:`AttentionCall`), so it is tested without
any particular device, and it is the only place that decides. The table in ``docs/attention.md`` is this rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

Backend = Literal["auto", "math", "sdpa", "chunked", "flash"]
#: every backend name, in one place: configs, the CLI and the checks read it from here
BACKENDS: tuple[str, ...] = get_args(Backend)

#: what a call's mask is: nothing, ``is_causal`` alone, or an ``attn_mask`` (bool or float, causal or not)
MaskKind = Literal["none", "causal", "bool", "float"]

# torch's fused CPU kernel has no dropout: with dropout it falls back to its O(T²) math kernel. From this many
# scores per head on, "auto" takes our chunked kernel instead, whose memory stays O(T).
DROPOUT_CHUNKED_FROM = 1024 * 1024

#: Where ``backend="flash"`` was *measured* faster than torch's fused kernel on CUDA, forward and forward +
#: backward: ``(mask kind, dtype) -> the number of keys from which it wins``. ``benchmarks/bench_gpu.py`` prints
#: the rows its run supports; only rows measured on a GPU belong here. Empty until then, so on CUDA ``"auto"``
#: runs torch's kernel everywhere (docs/attention.md and docs/gpu.md say which rows await measurement).
FLASH_FASTER: dict[tuple[str, str], int] = {}


@dataclass(frozen=True)
class AttentionCall:
    """What the ``"auto"`` rule looks at: the facts of one call, nothing else.

    Attributes:
        device: ``"cpu"``, ``"cuda"``, ... (``tensor.device.type``).
        t_q, t_k: number of queries and keys.
        dropout: whether dropout is on (``dropout_p > 0``).
        return_weights: whether the weights ``(..., Tq, Tk)`` are wanted.
        dtype: the query's dtype, as torch names it: ``"float32"``, ``"bfloat16"``, ``"float16"``, ...
        mask: ``"none"``, ``"causal"`` (``is_causal`` alone), ``"bool"`` or ``"float"`` (an ``attn_mask``).
        flash: whether ``backend="flash"`` can run this call (triton, device, head dim, dtype).
    """

    device: str
    t_q: int
    t_k: int
    dropout: bool = False
    return_weights: bool = False
    dtype: str = "float32"
    mask: MaskKind = "none"
    flash: bool = False


def flash_measured_faster(call: AttentionCall) -> bool:
    """Whether :data:`FLASH_FASTER` holds a measurement saying flash beats torch's kernel for this call."""
    since = FLASH_FASTER.get((call.mask, call.dtype))
    return since is not None and call.t_k >= since


def choose_backend(call: AttentionCall) -> str:
    """What ``backend="auto"`` runs: the fastest backend that can do what was asked.

    - weights wanted: ``"math"``, the only backend that materialises them;
    - one query on the CPU (decoding with a KV cache): ``"math"``, two small matmuls, far cheaper than setting
      up the fused kernel;
    - dropout on the CPU with ``Tq·Tk ≥ 2²⁰``: ``"chunked"`` (torch's kernel would fall back to O(T²) memory);
    - CUDA, no dropout, flash can run and :data:`FLASH_FASTER` has a measurement saying it wins: ``"flash"``;
    - otherwise ``"sdpa"``, torch's fused kernel (it does dropout itself on CUDA). Never ``"chunked"`` on a GPU:
      a PyTorch loop over blocks there is orders of magnitude slower than torch's fused kernels.
    """
    if call.return_weights:
        return "math"
    if call.device == "cpu" and call.t_q == 1:
        return "math"
    if call.device == "cpu" and call.dropout and call.t_q * call.t_k >= DROPOUT_CHUNKED_FROM:
        return "chunked"
    if call.device == "cuda" and call.flash and not call.dropout and flash_measured_faster(call):
        return "flash"
    return "sdpa"
