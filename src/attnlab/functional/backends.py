"""The backends of :func:`~attnlab.functional.scaled_dot_product_attention`: what each one runs (:data:`KERNELS`,
the one table of them), and the rule ``"auto"`` follows to pick one.

The rule is a pure function of plain facts about the call (:class:`AttentionCall`), so it is tested without
any particular device, and it is the only place that decides. The table in ``docs/attention.md`` is this rule.
Adding a backend is a module with its kernel and one row of :data:`KERNELS`; configs, the command line, the checks
and ``attnlab bench`` read the names from here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from attnlab.functional.chunked import chunked_attention
from attnlab.functional.grouped import fold_groups, unfold_groups
from attnlab.functional.logit_options import with_sink_key
from attnlab.functional.masks import merge_masks
from attnlab.functional.math_attention import math_attention
from attnlab.functional.precision import float32_for_cpu_backward, in_float32

#: ``run(query, key, value, attn_mask, dropout_p, is_causal, scale, groups, return_weights, softcap, sinks) ->
#: (output, weights)``: the arguments of :func:`~attnlab.functional.attend`, checked, with ``scale`` a float and
#: ``groups`` the number of query heads per key/value head (1 without GQA); ``weights`` is None unless the kernel
#: materialises them
Run = Callable[[Tensor, Tensor, Tensor, Tensor | None, float, bool, float, int, bool, float | None, Tensor | None],
               tuple[Tensor, Tensor | None]]


@dataclass(frozen=True)
class Kernel:
    """One backend: how it runs a call, and what the checks and ``attnlab bench`` need to know of it.

    Attributes:
        run: see :data:`Run`.
        weights: it materialises the weights, so it can return them (``return_weights=True``).
        memory: what its extra memory holds: ``"scores"`` (the whole score matrix: O(T²)), ``"blocks"`` (a few
            blocks of scores at a time) or ``"rows"`` (a few numbers per query: O(T)).
        cpu_gflops: a rough rate on a laptop CPU (GFLOP/s, every query-key pair counted), with which
            ``attnlab bench`` plans a case before it has measured the backend.
        cpu: it computes on a CPU (flash runs there only under Triton's interpreter, for tests, too slow to time).
        softcap: it can soft-cap the scores, and takes sinks in O(T) memory (it computes the scores itself; torch's
            fused kernel cannot cap, and takes sinks only as a mask column, ``(..., Tq, Tk + 1)`` of memory).
    """

    run: Run
    weights: bool = False
    memory: Literal["scores", "blocks", "rows"] = "rows"
    cpu_gflops: float = 150.0
    cpu: bool = True
    softcap: bool = True


def _shared_heads(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None, is_causal: bool,
                  groups: int, sinks: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor | None, bool]:
    """For the kernels that read one key/value head per query head: grouped-query attention without copying the
    keys (each group's query heads folded into rows of its key/value head) where the mask and the sinks (one per
    query head) allow, else with the key/value heads repeated (causal is top-left per head). Also whether the output
    must be unfolded."""
    if groups == 1:
        return query, key, value, attn_mask, False
    if not is_causal and sinks is None:  # decoding, or a mask of its own
        query, attn_mask = fold_groups(query, attn_mask, groups)
        return query, key, value, attn_mask, True
    return query, key.repeat_interleave(groups, dim=-3), value.repeat_interleave(groups, dim=-3), attn_mask, False


def _math(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None, dropout_p: float, is_causal: bool,
          scale: float, groups: int, return_weights: bool, softcap: float | None = None,
          sinks: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
    """The textbook path: scores, mask, softmax, weighted sum, every matrix explicit."""
    may_be_empty = attn_mask is not None  # a causal mask alone leaves every query some key: no empty rows
    query, key, value, attn_mask, folded = _shared_heads(query, key, value, attn_mask, is_causal, groups, sinks)
    mask = merge_masks(attn_mask, is_causal, query.shape[-2], key.shape[-2], query.dtype, query.device)
    output, weights = math_attention(query, key, value, mask, dropout_p, scale, may_be_empty=may_be_empty,
                                     return_weights=return_weights, softcap=softcap, sinks=sinks)
    if folded:
        output, weights = unfold_groups(output, groups), None if weights is None else unfold_groups(weights, groups)
    return output, weights if return_weights else None


def _chunked(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None, dropout_p: float, is_causal: bool,
             scale: float, groups: int, return_weights: bool, softcap: float | None = None,
             sinks: Tensor | None = None) -> tuple[Tensor, None]:
    """Online softmax over blocks of keys: O(T) memory."""
    query, key, value, attn_mask, folded = _shared_heads(query, key, value, attn_mask, is_causal, groups, sinks)
    output = chunked_attention(query, key, value, attn_mask, is_causal, dropout_p, scale, softcap=softcap,
                               sinks=sinks)
    return (unfold_groups(output, groups) if folded else output), None


def _sdpa(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None, dropout_p: float, is_causal: bool,
          scale: float, groups: int, return_weights: bool, softcap: float | None = None,
          sinks: Tensor | None = None) -> tuple[Tensor, None]:
    """torch's fused kernel (it reads grouped key/value heads itself); sinks as one more key, of zeros, whose score
    the mask sets (:func:`~attnlab.functional.logit_options.with_sink_key`). No soft-capping."""
    if softcap is not None:
        raise ValueError("backend='sdpa' cannot soft-cap the scores (torch's kernel computes them); use backend="
                         "'math', 'chunked', 'flash' or 'auto'")
    if sinks is not None:
        mask = merge_masks(attn_mask, is_causal, query.shape[-2], key.shape[-2], query.dtype, query.device)
        key, value, attn_mask = with_sink_key(key, value, mask, sinks, query)
        is_causal = False
    if attn_mask is not None and is_causal:  # torch refuses both at once: merge them ourselves
        t_q, t_k = query.shape[-2], key.shape[-2]
        attn_mask, is_causal = merge_masks(attn_mask, True, t_q, t_k, query.dtype, query.device), False
    if attn_mask is not None and attn_mask.dtype != torch.bool:
        attn_mask = attn_mask.to(query.dtype)
    return F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p,
                                          is_causal=is_causal, scale=scale, enable_gqa=groups > 1), None


def _flash(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None, dropout_p: float, is_causal: bool,
           scale: float, groups: int, return_weights: bool, softcap: float | None = None,
           sinks: Tensor | None = None) -> tuple[Tensor, None]:
    """attnlab's Triton kernel (it reads grouped key/value heads itself)."""
    from attnlab.functional.flash import flash_backend

    return flash_backend(query, key, value, attn_mask, dropout_p, is_causal, scale, groups > 1, softcap, sinks), None


#: every backend but ``"auto"``, by name: the one table (the order is the docs' and the benchmark's)
KERNELS: dict[str, Kernel] = {
    "math": Kernel(in_float32(_math), weights=True, memory="scores", cpu_gflops=30.0),
    "sdpa": Kernel(float32_for_cpu_backward(_sdpa), softcap=False),
    "chunked": Kernel(in_float32(_chunked), memory="blocks", cpu_gflops=40.0),
    "flash": Kernel(_flash, cpu=False),
}
Backend = Literal["auto", "math", "sdpa", "chunked", "flash"]  # for type checkers: "auto" and KERNELS' names
#: every backend name: ``"auto"`` (:func:`choose_backend` picks), then :data:`KERNELS`
BACKENDS: tuple[str, ...] = ("auto", *KERNELS)

#: what a call's mask is: nothing, ``is_causal`` alone, or an ``attn_mask`` (bool or float, causal or not)
MaskKind = Literal["none", "causal", "bool", "float"]

# On the CPU, a few queries over a few keys (a decoding step of a few tokens per row; a search's beams querying their
# source's memory together) are two small matmuls: torch's fused kernel spends more setting up its blocks per head
# than the work takes (measured 2-5x slower at Tq 2-8, Tk 20-128, head_dim 16-32; as fast at head_dim 64). Not where
# the keys are strided (AttentionCall.strided): the matmuls would copy the keys and the values first, and torch's
# kernel reads them as they are. A search without the decoding caches projects its 4,000 rows' memory afresh at
# every step: 612 ms of such copies in a 4.1-4.8 s search at seq2seq.md C's size (1,000 dates, beam 4).
FEW_QUERIES, FEW_SCORES = 8, 512


def folds(t: Tensor) -> bool:
    """Whether ``t (..., T, d)``'s batch axes fold into one stride, as a batched matmul takes them without a copy
    (axes of size 1 aside): a contiguous tensor's do, and a cache's filled part; ``(B, T, D)`` viewed as
    ``(B, H, T, D / H)`` does not."""
    expected = None
    for size, stride in zip(reversed(t.shape[:-2]), reversed(t.stride()[:-2]), strict=True):
        if size == 1:
            continue
        if expected is not None and stride != expected:
            return False
        expected = stride * size
    return True

# torch's fused CPU kernel has no dropout: with dropout it falls back to its O(T²) math kernel. From this many
# scores per head on, "auto" takes our chunked kernel instead, whose memory stays O(T).
DROPOUT_CHUNKED_FROM = 1024 * 1024

#: Where ``backend="flash"`` was *measured* faster than torch's fused kernel on CUDA, forward and forward +
#: backward: ``(mask kind, dtype) -> the number of keys from which it wins``. It was measured with as many queries
#: as keys, so a call needs that many of both (a decoding step's few queries were not measured).
#: ``benchmarks/bench_gpu.py`` prints the rows its run supports; only rows measured on a GPU belong here, as written
#: at the end of ``benchmarks/results/gpu.md`` (an H100: a bfloat16 padding mask at 4096 keys, 1.16× forward, 1.04×
#: forward + backward; with a causal mask too 2.29× and 1.80×). Elsewhere on CUDA ``"auto"`` runs torch's kernel.
FLASH_FASTER: dict[tuple[str, str], int] = {("bool", "bfloat16"): 4096}


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
        softcap: whether the scores are soft-capped (only a kernel with :attr:`Kernel.softcap` can).
        sinks: whether a sink logit per head joins the softmax (every kernel can; torch's with an O(Tq·Tk) mask).
        strided: whether the keys' batch axes do not fold into one (:func:`folds`), so that a batched matmul
            would copy them: the heads of a sequence projected at this call, ``(B, T, D)`` viewed as
            ``(B, H, T, head_dim)``. Only read for a few queries on the CPU (:data:`FEW_QUERIES`).
    """

    device: str
    t_q: int
    t_k: int
    dropout: bool = False
    return_weights: bool = False
    dtype: str = "float32"
    mask: MaskKind = "none"
    flash: bool = False
    softcap: bool = False
    sinks: bool = False
    strided: bool = False


def flash_measured_faster(call: AttentionCall) -> bool:
    """Whether :data:`FLASH_FASTER` holds a measurement saying flash beats torch's kernel for this call."""
    since = FLASH_FASTER.get((call.mask, call.dtype))
    return since is not None and min(call.t_q, call.t_k) >= since


def choose_backend(call: AttentionCall) -> str:
    """What ``backend="auto"`` runs: the fastest backend that can do what was asked.

    - weights wanted: ``"math"``, the only backend that materialises them;
    - one query on the CPU (decoding with a KV cache), or a few (``Tq ≤ 8``) over few scores (``Tq·Tk ≤ 512``):
      ``"math"``, two small matmuls, far cheaper than setting up the fused kernel;
    - dropout on the CPU with ``Tq·Tk ≥ 2²⁰``: ``"chunked"`` (torch's kernel would fall back to O(T²) memory);
    - CUDA, no dropout, flash can run and :data:`FLASH_FASTER` has a measurement saying it wins: ``"flash"``;
    - otherwise ``"sdpa"``, torch's fused kernel (it does dropout itself on CUDA). Never ``"chunked"`` on a GPU:
      a PyTorch loop over blocks there is orders of magnitude slower than torch's fused kernels.

    Soft-capped scores, or sinks over ``Tq·Tk ≥ 2²⁰`` scores (torch's kernel would need a mask of them all): never a
    kernel without :attr:`Kernel.softcap`; in torch's kernel's place, ``"flash"`` on CUDA where it can run without
    dropout, ``"chunked"`` on the CPU from ``Tq·Tk ≥ 2²⁰`` scores, else ``"math"``.
    """
    chosen = _fastest(call)
    if not needs_own_scores(call) or KERNELS[chosen].softcap:
        return chosen
    if call.device == "cuda" and call.flash and not call.dropout:
        return "flash"
    return "chunked" if call.device == "cpu" and call.t_q * call.t_k >= DROPOUT_CHUNKED_FROM else "math"


def needs_own_scores(call: AttentionCall) -> bool:
    """Whether only a kernel that computes the scores itself will do: a cap, or sinks over many scores."""
    return call.softcap or (call.sinks and call.t_q * call.t_k >= DROPOUT_CHUNKED_FROM)


def _fastest(call: AttentionCall) -> str:
    """:func:`choose_backend`'s rule before it looks at what a kernel cannot do."""
    if call.return_weights:
        return "math"
    if call.device == "cpu" and (call.t_q == 1 or (call.t_q <= FEW_QUERIES and call.t_q * call.t_k <= FEW_SCORES
                                                   and not call.strided)):
        return "math"
    if call.device == "cpu" and call.dropout and call.t_q * call.t_k >= DROPOUT_CHUNKED_FROM:
        return "chunked"
    if call.device == "cuda" and call.flash and not call.dropout and flash_measured_faster(call):
        return "flash"
    return "sdpa"


def resolve_backend(backend: str, auto_choice: str, return_weights: bool) -> str:
    """The backend to run: ``auto_choice`` for ``"auto"``; only a kernel that materialises the weights returns them."""
    chosen = auto_choice if backend == "auto" else backend
    if return_weights and not KERNELS[chosen].weights:
        raise ValueError(f"backend={backend!r} cannot return weights; use backend='math' or 'auto'")
    return chosen
