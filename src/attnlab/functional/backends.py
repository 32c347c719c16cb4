"""The backends of :func:`~attnlab.functional.scaled_dot_product_attention`: one table of attention functions
(:data:`KERNELS`), each called with the same keyword arguments, and the rule ``"auto"`` follows to pick one.

Every function in the table is called as

    run(query, key, value, *, attn_mask, dropout_p, is_causal, scale, groups, return_weights, softcap, sinks)
        -> (output, weights or None)

with the arguments already checked, ``scale`` a float and ``groups`` the number of query heads per key/value head
(1 without GQA). The rule, :func:`choose_backend`, reads a :class:`CallKind`: the device, the dtype, the shape
class (``⌊log₂ Tq⌋`` and ``⌊log₂ Tk⌋``), the mask's kind and what was asked for; it is decided once per kind
(:func:`auto_backend` keeps the answers), never recomputed from the tensors at every call. Adding a backend is a
module with its kernel and one row of :data:`KERNELS`.
"""

from __future__ import annotations

import functools
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
from attnlab.functional.precision import in_float32

#: ``run(query, key, value, *, attn_mask, dropout_p, is_causal, scale, groups, return_weights, softcap, sinks) ->
#: (output, weights or None)``: one attention function of the table, keyword arguments only after q, k, v
AttentionFunction = Callable[..., tuple[Tensor, Tensor | None]]


@dataclass(frozen=True)
class Kernel:
    """One backend: how it runs a call, and what the checks and ``attnlab bench`` need to know of it.

    Attributes:
        run: the :data:`AttentionFunction`.
        weights: it materialises the weights, so it can return them (``return_weights=True``).
        memory: what its extra memory holds: ``"scores"`` (the whole score matrix: O(T²)), ``"blocks"`` (a few
            blocks of scores at a time) or ``"rows"`` (a few numbers per query: O(T)).
        cpu_gflops: a rough rate on a laptop CPU (GFLOP/s, every query-key pair counted), with which
            ``attnlab bench`` plans a case before it has measured the backend.
        cpu: it computes on a CPU (flash runs there only under Triton's interpreter, for tests, too slow to time).
        softcap: it can soft-cap the scores, and takes sinks in O(T) memory (it computes the scores itself; torch's
            fused kernel cannot cap, and takes sinks only as a mask column, ``(..., Tq, Tk + 1)`` of memory).
    """

    run: AttentionFunction
    weights: bool = False
    memory: Literal["scores", "blocks", "rows"] = "rows"
    cpu_gflops: float = 150.0
    cpu: bool = True
    softcap: bool = True


def shared_heads(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None, is_causal: bool,
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


@in_float32
def math_kernel(query: Tensor, key: Tensor, value: Tensor, *, attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                is_causal: bool = False, scale: float, groups: int = 1, return_weights: bool = False,
                softcap: float | None = None, sinks: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
    """The textbook path: scores, mask, softmax, weighted sum, every matrix explicit."""
    may_be_empty = attn_mask is not None  # a causal mask alone leaves every query some key: no empty rows
    query, key, value, attn_mask, folded = shared_heads(query, key, value, attn_mask, is_causal, groups, sinks)
    mask = merge_masks(attn_mask, is_causal, query.shape[-2], key.shape[-2], query.dtype, query.device)
    output, weights = math_attention(query, key, value, mask, dropout_p, scale, may_be_empty=may_be_empty,
                                     return_weights=return_weights, softcap=softcap, sinks=sinks)
    if folded:
        output, weights = unfold_groups(output, groups), None if weights is None else unfold_groups(weights, groups)
    return output, weights if return_weights else None


@in_float32
def chunked_kernel(query: Tensor, key: Tensor, value: Tensor, *, attn_mask: Tensor | None = None,
                   dropout_p: float = 0.0, is_causal: bool = False, scale: float, groups: int = 1,
                   return_weights: bool = False, softcap: float | None = None,
                   sinks: Tensor | None = None) -> tuple[Tensor, None]:
    """Online softmax over blocks of keys: O(T) memory."""
    query, key, value, attn_mask, folded = shared_heads(query, key, value, attn_mask, is_causal, groups, sinks)
    output = chunked_attention(query, key, value, attn_mask, is_causal, dropout_p, scale, softcap=softcap,
                               sinks=sinks)
    return (unfold_groups(output, groups) if folded else output), None


def sdpa_kernel(query: Tensor, key: Tensor, value: Tensor, *, attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                is_causal: bool = False, scale: float, groups: int = 1, return_weights: bool = False,
                softcap: float | None = None, sinks: Tensor | None = None) -> tuple[Tensor, None]:
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


def flash_kernel(query: Tensor, key: Tensor, value: Tensor, *, attn_mask: Tensor | None = None,
                 dropout_p: float = 0.0, is_causal: bool = False, scale: float, groups: int = 1,
                 return_weights: bool = False, softcap: float | None = None,
                 sinks: Tensor | None = None) -> tuple[Tensor, None]:
    """attnlab's Triton kernel (it reads grouped key/value heads itself)."""
    from attnlab.functional.flash import flash_backend

    return flash_backend(query, key, value, attn_mask, dropout_p, is_causal, scale, groups > 1, softcap, sinks), None


#: every backend but ``"auto"``, by name: the one table (the order is the docs' and the benchmark's)
KERNELS: dict[str, Kernel] = {
    "math": Kernel(math_kernel, weights=True, memory="scores", cpu_gflops=30.0),
    "sdpa": Kernel(sdpa_kernel, softcap=False),
    "chunked": Kernel(chunked_kernel, memory="blocks", cpu_gflops=40.0),
    "flash": Kernel(flash_kernel, cpu=False),
}
Backend = Literal["auto", "math", "sdpa", "chunked", "flash"]  # for type checkers: "auto" and KERNELS' names
#: every backend name: ``"auto"`` (:func:`choose_backend` picks), then :data:`KERNELS`
BACKENDS: tuple[str, ...] = ("auto", *KERNELS)

#: what a call's mask is: nothing, ``is_causal`` alone, or an ``attn_mask`` (bool or float, causal or not)
MaskKind = Literal["none", "causal", "bool", "float"]

#: ``⌊log₂ Tq⌋ + ⌊log₂ Tk⌋`` from which a call is "long": 2²⁰ query-key pairs per head (1,024 queries over 1,024
#: keys). torch's fused CPU kernel has no dropout: with dropout it falls back to its O(T²) math kernel, and takes
#: sinks only as a mask column of O(Tq·Tk); a long call goes to our chunked kernel instead, whose memory stays O(T).
LONG_LOG2 = 20

#: Where ``backend="flash"`` was *measured* faster than torch's fused kernel on CUDA, forward and forward +
#: backward: ``(mask kind, dtype) -> the number of keys from which it wins``. It was measured with as many queries
#: as keys, so a call needs that many of both (a decoding step's few queries were not measured).
#: ``benchmarks/bench_gpu.py`` prints the rows its run supports; only rows measured on a GPU belong here, as written
#: at the end of ``benchmarks/results/gpu.md`` (an H100: a bfloat16 padding mask at 4096 keys, 1.16× forward, 1.04×
#: forward + backward; with a causal mask too 2.29× and 1.80×). Elsewhere on CUDA ``"auto"`` runs torch's kernel.
FLASH_FASTER: dict[tuple[str, str], int] = {("bool", "bfloat16"): 4096}


@dataclass(frozen=True)
class CallKind:
    """What the ``"auto"`` rule looks at: the kind of a call, never its tensors' values.

    Attributes:
        device: ``"cpu"``, ``"cuda"``, ... (``tensor.device.type``).
        dtype: the query's dtype, as torch names it: ``"float32"``, ``"bfloat16"``, ...
        queries, keys: the shape class, ``⌊log₂ Tq⌋`` and ``⌊log₂ Tk⌋``.
        mask: ``"none"``, ``"causal"`` (``is_causal`` alone), ``"bool"`` or ``"float"`` (an ``attn_mask``).
        dropout: whether dropout is on.
        weights: whether the weights ``(..., Tq, Tk)`` are wanted.
        softcap: whether the scores are soft-capped (only a kernel with :attr:`Kernel.softcap` can).
        sinks: whether a sink logit per head joins the softmax.
        flash: whether ``backend="flash"`` can run here (triton, a recent GPU; asked on CUDA only).
    """

    device: str
    dtype: str = "float32"
    queries: int = 0
    keys: int = 0
    mask: MaskKind = "none"
    dropout: bool = False
    weights: bool = False
    softcap: bool = False
    sinks: bool = False
    flash: bool = False

    @property
    def long(self) -> bool:
        """At least 2²⁰ query-key pairs per head, counted by the shape class."""
        return self.queries + self.keys >= LONG_LOG2

    @property
    def own_scores(self) -> bool:
        """Only a kernel that computes the scores itself will do: a cap, or sinks over a long call."""
        return self.softcap or (self.sinks and self.long)


def flash_measured_faster(kind: CallKind) -> bool:
    """Whether :data:`FLASH_FASTER` holds a measurement saying flash beats torch's kernel for this kind of call."""
    since = FLASH_FASTER.get((kind.mask, kind.dtype))
    return since is not None and 1 << min(kind.queries, kind.keys) >= since


def choose_backend(kind: CallKind) -> str:
    """What ``backend="auto"`` runs: torch's fused kernel, unless the call needs what it cannot do.

    1. weights wanted: ``"math"``, the only backend that materialises them;
    2. on CUDA without dropout, where flash can run and either the scores are its own to compute (a soft-cap, or
       sinks over a long call) or :data:`FLASH_FASTER` records it measured faster: ``"flash"``;
    3. on the CPU, a long call with dropout or its own scores: ``"chunked"`` (torch's kernel would fall back to
       O(T²) memory);
    4. its own scores otherwise: ``"math"``;
    5. everything else: ``"sdpa"``, torch's fused kernel (it does dropout itself on CUDA).
    """
    if kind.weights:
        return "math"
    if kind.device == "cuda" and kind.flash and not kind.dropout and (kind.own_scores or flash_measured_faster(kind)):
        return "flash"
    if kind.device == "cpu" and kind.long and (kind.dropout or kind.own_scores):
        return "chunked"
    if kind.own_scores:
        return "math"
    return "sdpa"


@functools.lru_cache(maxsize=4096)
def auto_backend(device: torch.device, dtype: torch.dtype, queries: int, keys: int, head_dim: int, mask: MaskKind,
                 dropout: bool, weights: bool, softcap: bool, sinks: bool) -> Kernel:
    """:func:`choose_backend`'s kernel for one kind of call, decided once per kind and kept: the lengths come as
    ``Tq.bit_length()`` and ``Tk.bit_length()`` (the shape class), so a decoding loop, whose keys grow by one a
    step, asks the rule once per power of two, not once per token."""
    kind = CallKind(device.type, str(dtype).removeprefix("torch."), queries - 1, keys - 1, mask, dropout, weights,
                    softcap, sinks)
    if kind.device == "cuda" and (kind.own_scores or flash_measured_faster(kind)):
        from attnlab.functional.flash import DTYPES, MAX_HEAD_DIM, flash_status

        runs = flash_status(device) is None and dtype in DTYPES and 1 <= head_dim <= MAX_HEAD_DIM
        kind = CallKind(**{**kind.__dict__, "flash": runs})
    return KERNELS[choose_backend(kind)]
