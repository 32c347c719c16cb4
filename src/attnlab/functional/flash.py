"""FlashAttention (Dao et al. 2022; Dao 2023): the ``chunked`` backend's online softmax as fused Triton kernels.

Forward: one program per block of ``block_q`` queries of one head walks the keys ``block_k`` at a time,
keeping per query, in registers, a running maximum ``m``, a normaliser ``l = Σ exp(s - m)`` and
``acc = Σ exp(s - m) v``; when a block raises the maximum, ``l`` and ``acc`` are rescaled by
``exp(m_old - m_new)``. At the end ``out = acc / l`` and ``lse = m + log l`` is saved: neither the scores
nor the weights ever reach memory.

Backward (FlashAttention-2): ``delta = rowsum(dO ∘ O)`` per query; then one program per key block
recomputes ``P = exp(S - lse)`` for every query block and sums ``dV += Pᵀ dO`` and ``dK += dSᵀ Q · scale``,
with ``dS = P ∘ (dO Vᵀ - delta)``; a second pass, one program per query block, sums ``dQ += dS K · scale``.
No atomics, so gradients are deterministic. With ``is_causal``, key blocks wholly above the diagonal are
never visited, forward or backward. Grouped-query attention: query head ``h`` reads key/value head
``h // (H / Hkv)``, and a key program sums dK, dV over the query heads of its group.

Options: soft-capped scores ``cap · tanh(s / cap)`` (each ``dS`` times ``1 − tanh²``), and sinks, one logit per
head that starts every row's softmax (``m = sink``, ``l = 1``); the sinks' gradient, ``−Σ exp(sink − lse) · delta``
per head, is summed here from what the backward pass already has.

Runs on NVIDIA GPUs, or on the CPU under Triton's interpreter (``TRITON_INTERPRET=1`` set before this module
is imported), slowly: that is how the tests run without a GPU.
"""

from __future__ import annotations

import contextlib
from types import ModuleType

import torch
from torch import Tensor

from attnlab.arguments import check_scale
from attnlab.functional.checks import check_mask
from attnlab.functional.logit_options import check_sinks, check_softcap

_IMPORT_ERROR = ""
_kernels: ModuleType | None
try:  # triton is optional: without it, flash_status says why and the other backends still work
    import attnlab.functional.flash_kernels as _kernels
except ImportError as error:
    _kernels, _IMPORT_ERROR = None, f"{type(error).__name__}: {error}"

DTYPES = (torch.float16, torch.bfloat16, torch.float32)
MAX_HEAD_DIM = 256
_DELTA_BLOCK_Q = 64


def flash_status(device: torch.device | str) -> str | None:
    """None if ``backend="flash"`` can run on ``device``, else the reason it cannot.

    Example:
        >>> reason = flash_status(query.device)
        >>> backend = "flash" if reason is None else "sdpa"
    """
    if _kernels is None:
        return f"triton is not installed (pip install 'attnlab[gpu]'; {_IMPORT_ERROR})"
    device = torch.device(device)
    if _kernels.INTERPRETED:
        return None if device.type in ("cpu", "cuda") else f"Triton's interpreter runs on the CPU, not {device.type}"
    if device.type == "cpu":
        return ("on the CPU, backend='flash' needs Triton's interpreter: set TRITON_INTERPRET=1 before "
                "attnlab.functional.flash is imported (slow; meant for tests)")
    if device.type != "cuda":
        return f"backend='flash' runs on CUDA (or the CPU under TRITON_INTERPRET=1), not on {device.type}"
    if not torch.cuda.is_available():
        return "torch.cuda is not available (no GPU, or a CPU-only torch build)"
    if torch.version.hip is None and torch.cuda.get_device_capability(device) < (8, 0):
        major, minor = torch.cuda.get_device_capability(device)
        return f"backend='flash' needs an NVIDIA GPU of compute capability 8.0 or newer, got {major}.{minor}"
    return None


def _check_inputs(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None, enable_gqa: bool) -> None:
    """Everything ``backend="flash"`` cannot run, refused with what was given and what works."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(f"backend='flash' needs {name} of shape (B, H, T, D), got shape {tuple(t.shape)}")
        if t.dtype not in DTYPES:
            raise ValueError(f"backend='flash' supports float16, bfloat16 and float32, got {name} of {t.dtype}")
    if not (query.dtype == key.dtype == value.dtype):
        raise ValueError(f"backend='flash' needs query, key and value of one dtype, got {query.dtype}, {key.dtype} "
                         f"and {value.dtype}")
    if not (query.device == key.device == value.device):
        raise ValueError(f"backend='flash' needs query, key and value on one device, got {query.device}, {key.device} "
                         f"and {value.device}")
    (b, h, t_q, d), (b_k, h_kv, t_k, d_k) = query.shape, key.shape
    if key.shape != value.shape:
        raise ValueError("backend='flash' needs key and value of one shape (B, Hkv, Tk, D), got key "
                         f"{tuple(key.shape)} and value {tuple(value.shape)}")
    if b_k != b or d_k != d:
        raise ValueError("backend='flash' needs key/value (B, Hkv, Tk, D) with query's B and D, got query "
                         f"{tuple(query.shape)} and key {tuple(key.shape)}")
    if not 1 <= d <= MAX_HEAD_DIM:
        raise ValueError(f"backend='flash' supports head_dim from 1 to {MAX_HEAD_DIM}, got {d}; backend='sdpa' or "
                         "'auto' take any head_dim")
    if min(b, h, t_q, h_kv, t_k) == 0:
        raise ValueError(f"backend='flash' needs non-empty inputs, got query {tuple(query.shape)} and key "
                         f"{tuple(key.shape)}")
    if not enable_gqa and h != h_kv:
        raise ValueError(f"backend='flash' needs as many key/value heads as query heads, got {h} and {h_kv}; pass "
                         "enable_gqa=True for grouped-query attention")
    if enable_gqa and h % h_kv != 0:
        raise ValueError(f"backend='flash' with enable_gqa=True needs num_heads a multiple of num_kv_heads, got {h} "
                         f"query heads and {h_kv} key/value heads")
    check_mask(attn_mask, (b, h), t_q, t_k)
    if attn_mask is not None and attn_mask.device != query.device:
        raise ValueError(f"backend='flash' needs attn_mask on query's device {query.device}, got {attn_mask.device}")
    if attn_mask is not None and attn_mask.requires_grad:
        raise ValueError("backend='flash' does not differentiate attn_mask, which requires grad; detach it, or use "
                         "backend='math' or 'sdpa'")
    reason = flash_status(query.device)
    if reason is not None:
        raise ValueError(f"backend='flash' cannot run on {query.device}: {reason}; backend='sdpa' or 'auto' run "
                         "everywhere")


def _bucket(n: int) -> int:
    """The next power of two: sequence lengths that share one keep one autotuned config."""
    return 1 << (n - 1).bit_length()


def _mask_args(attn_mask: Tensor | None, like: Tensor, shape: tuple[int, int, int, int]) -> tuple[Tensor, int, tuple]:
    """(tensor, kind, 4 strides) for the kernels: the mask seen as ``(B, H, Tq, Tk)`` by stride-0 broadcasting."""
    assert _kernels is not None  # the kernels run only where flash_status found them
    if attn_mask is None:
        return like, _kernels.MASK_NONE, (0, 0, 0, 0)
    mask = attn_mask.expand(shape)  # a view: broadcast dims get stride 0, nothing is materialised
    if mask.dtype == torch.bool:
        return mask.view(torch.uint8), _kernels.MASK_BOOL, mask.stride()
    return mask, _kernels.MASK_FLOAT, mask.stride()


def _kernel_args(q: Tensor, k: Tensor, mask: Tensor | None, is_causal: bool, softcap: float | None = None,
                 sinks: Tensor | None = None) -> tuple[Tensor, tuple, dict]:
    """What the forward and both backward passes share: the mask, its strides, and the keyword arguments."""
    assert _kernels is not None  # the kernels run only where flash_status found them
    b, h, t_q, d = q.shape
    t_k = k.shape[2]
    mask, mask_kind, mask_strides = _mask_args(mask, q, (b, h, t_q, t_k))
    meta = dict(t_q_bucket=_bucket(t_q), t_k_bucket=_bucket(t_k), HEAD_DIM=d, BLOCK_D=max(16, _bucket(d)),
                MASK_KIND=mask_kind, MASK_PER_KEY=mask_strides[2] == 0, IS_CAUSAL=is_causal,
                PRECISION="ieee" if q.dtype == torch.float32 else "tf32",  # no TF32: float32 agrees with torch's
                SOFTCAP=softcap is not None, HAS_SINKS=sinks is not None, **_kernels.META)
    return mask, mask_strides, meta


def _cdiv(n: int, block: int) -> int:
    return -(-n // block)


def _on(device: torch.device):
    """Launch on the tensors' GPU, not the current one (Triton launches on torch's current device)."""
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()


def _cap_args(scale: float, softcap: float | None) -> tuple[float, float]:
    """``(scale / cap, cap · log2 e)``: the kernels' ``s = cap · tanh(q·k · scale / cap)`` in log2 units (unused
    without a cap)."""
    assert _kernels is not None  # the kernels run only where flash_status found them
    return (0.0, 0.0) if softcap is None else (scale / softcap, softcap * _kernels.LOG2E.value)


def _forward(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool, scale: float,
             softcap: float | None = None, sinks: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """``out (B, H, Tq, D)`` in q's dtype and ``lse (B, H, Tq)`` in float32 (+inf where nothing is allowed)."""
    b, h, t_q, d = q.shape
    assert _kernels is not None  # the kernels run only where flash_status found them
    h_kv, t_k = k.shape[1], k.shape[2]
    mask, mask_strides, meta = _kernel_args(q, k, mask, is_causal, softcap, sinks)
    out = q.new_empty(b, h, t_q, d)
    lse = torch.empty(b, h, t_q, device=q.device, dtype=torch.float32)
    with _on(q.device):
        _kernels.fwd[lambda m: (_cdiv(t_q, m["BLOCK_Q"]), b * h)](
            q, k, v, mask, q if sinks is None else sinks, out, lse, scale * _kernels.LOG2E.value,
            *_cap_args(scale, softcap), *q.stride(), *k.stride(), *v.stride(), *mask_strides, *out.stride(), h,
            h // h_kv, t_q, t_k, **meta,
        )
    return out, lse


def _backward(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool, scale: float,
              out: Tensor, lse: Tensor, d_out: Tensor, needs_dq: bool = True, needs_dkdv: bool = True,
              softcap: float | None = None,
              sinks: Tensor | None = None) -> tuple[Tensor | None, Tensor | None, Tensor | None, Tensor | None]:
    """dq, dk, dv (None where not needed) and the sinks' gradient (None without sinks): delta, then dK/dV over key
    blocks and dQ over query blocks."""
    b, h, t_q, d = q.shape
    assert _kernels is not None  # the kernels run only where flash_status found them
    h_kv, t_k = k.shape[1], k.shape[2]
    mask, mask_strides, meta = _kernel_args(q, k, mask, is_causal, softcap, sinks)
    delta = torch.empty_like(lse)
    delta_block = _kernels.META.get("BLOCK_Q", _DELTA_BLOCK_Q)
    shared = (q, k, v, mask, d_out, lse, delta)
    strides = (*q.stride(), *k.stride(), *v.stride(), *mask_strides, *d_out.stride())
    qk_scale = scale * _kernels.LOG2E.value
    scales = (qk_scale, scale, *_cap_args(scale, softcap))
    dq = dk = dv = None
    with _on(q.device):
        _kernels.delta_kernel[(_cdiv(t_q, delta_block), b * h)](
            out, d_out, delta, *out.stride(), *d_out.stride(), h, t_q,
            HEAD_DIM=d, BLOCK_D=meta["BLOCK_D"], BLOCK_Q=delta_block,
        )
        if needs_dq:
            dq = torch.empty_like(q, memory_format=torch.contiguous_format)
            _kernels.dq[lambda m: (_cdiv(t_q, m["BLOCK_Q"]), b * h)](
                *shared, dq, *scales, *strides, h, h // h_kv, t_q, t_k, **meta,
            )
        if needs_dkdv:
            dk = torch.empty_like(k, memory_format=torch.contiguous_format)
            dv = torch.empty_like(v, memory_format=torch.contiguous_format)
            _kernels.dkdv[lambda m: (_cdiv(t_k, m["BLOCK_K"]), b * h_kv)](
                *shared, dk, dv, *scales, *strides, h, h_kv, h // h_kv, t_q, t_k, **meta,
            )
    d_sinks = None
    if sinks is not None:  # each row's share of the sink, exp(sink - lse), times -delta, summed per head
        d_sinks = -((sinks.float()[:, None] - lse).exp() * delta).sum((0, 2)).to(sinks.dtype)
    return dq, dk, dv, d_sinks


class FlashAttention(torch.autograd.Function):
    """``autograd.Function`` wrapper: saves q, k, v, the mask, out and the per-row log-sum-exp, nothing ``(Tq, Tk)``."""

    @staticmethod
    def forward(ctx, q, k, v, mask, is_causal, scale, softcap=None, sinks=None):
        out, lse = _forward(q, k, v, mask, is_causal, scale, softcap, sinks)
        ctx.save_for_backward(q, k, v, mask, out, lse, sinks)
        ctx.is_causal, ctx.scale, ctx.softcap = is_causal, scale, softcap
        return out

    @staticmethod
    def backward(ctx, d_out):
        q, k, v, mask, out, lse, sinks = ctx.saved_tensors
        needs_q, needs_k, needs_v = ctx.needs_input_grad[:3]
        dq, dk, dv, d_sinks = _backward(q, k, v, mask, ctx.is_causal, ctx.scale, out, lse, d_out, needs_q,
                                        needs_k or needs_v, ctx.softcap, sinks)
        return dq, dk, dv, None, None, None, None, d_sinks


def flash_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
                    is_causal: bool = False, scale: float | None = None, enable_gqa: bool = False,
                    softcap: float | None = None, sinks: Tensor | None = None) -> Tensor:
    """softmax(Q Kᵀ · scale + mask) V by attnlab's fused Triton kernels: ``(B, H, Tq, D)`` in query's dtype.

    Args:
        query: ``(B, H, Tq, D)``, float16, bfloat16 or float32, any strides; ``1 <= D <= 256``.
        key, value: ``(B, Hkv, Tk, D)``; ``Hkv == H`` unless ``enable_gqa``.
        attn_mask: bool (True = may attend) or float (added to the scores), broadcastable to
            ``(B, H, Tq, Tk)``, e.g. a padding mask ``(B, 1, 1, Tk)``; read by broadcasting, never expanded
            in memory. Not differentiated.
        is_causal: query i sees keys 0..i (top-left aligned, like torch); may be combined with ``attn_mask``.
        scale: multiplies the scores; default ``1/sqrt(D)``.
        enable_gqa: grouped-query attention, as in torch: query head h reads key/value head ``h // (H // Hkv)``.
        softcap: scores become ``softcap · tanh(s / softcap)`` before the mask (Gemma 2); None: as they are.
        sinks: ``(H,)`` one logit per query head joining every row's softmax (gpt-oss); differentiated.

    Sums run in float32 whatever the input dtype. A query with every key masked gets output 0 and gradient 0.
    """
    _check_inputs(query, key, value, attn_mask, enable_gqa)
    check_scale(scale)
    check_softcap(softcap)
    check_sinks(sinks, query)
    scale = query.shape[-1] ** -0.5 if scale is None else float(scale)
    return FlashAttention.apply(query, key, value, attn_mask, bool(is_causal), scale,
                                None if softcap is None else float(softcap), sinks)


# ------------------------------------------------------------------------ as a backend of the attention op

_RUNS_ON: dict[torch.device, bool] = {}  # flash_status per device, asked once: it queries the GPU


def flash_can_run(query: Tensor) -> bool:
    """Whether ``backend="flash"`` can run a call with this query (``(..., T, D)``): triton, device, dtype, D."""
    device = query.device
    if device not in _RUNS_ON:
        _RUNS_ON[device] = flash_status(device) is None
    return _RUNS_ON[device] and query.dtype in DTYPES and 1 <= query.shape[-1] <= MAX_HEAD_DIM


def flash_backend(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None, dropout_p: float,
                  is_causal: bool, scale: float | None, enable_gqa: bool, softcap: float | None = None,
                  sinks: Tensor | None = None) -> Tensor:
    """``backend="flash"`` of :func:`~attnlab.functional.scaled_dot_product_attention`, any batch layout.

    q ``(..., Tq, D)``, k and v ``(..., Tk, D)`` (batch dims broadcast; with ``enable_gqa`` dim -3 holds the
    heads) are seen as the kernel's ``(N, H, T, D)``: views where the layout allows, copies only of the batch dims
    that broadcast. The output comes back as torch's SDPA shapes it, ``(batch..., Tq, D)``.
    """
    if dropout_p > 0.0:
        raise ValueError(f"backend='flash' has no dropout, got dropout_p={dropout_p}; use backend='sdpa' (torch's "
                         "kernel, with dropout), 'chunked', 'math' or 'auto'")
    rank = max(3, query.dim(), key.dim(), value.dim())  # (T, D) inputs get a batch of one head
    padded = [t.reshape((1,) * (rank - t.dim()) + tuple(t.shape)) for t in (query, key, value)]
    lead = tuple(torch.broadcast_shapes(*(t.shape[:-3] for t in padded)))
    if enable_gqa:  # query heads and key/value heads differ: each keeps its own
        heads = [t.shape[-3] for t in padded]
    else:
        heads = [torch.broadcast_shapes(*(t.shape[-3:-2] for t in padded))[0]] * 3
    q, k, v = (t.expand(*lead, h, *t.shape[-2:]).reshape(-1, h, *t.shape[-2:])
               for t, h in zip(padded, heads, strict=True))
    out = flash_attention(q, k, v, _mask_as_four_dims(attn_mask, lead), is_causal, scale, enable_gqa, softcap, sinks)
    out = out.reshape(*lead, heads[0], *out.shape[-2:])
    return out if max(query.dim(), key.dim(), value.dim()) >= 3 else out[0]

def _mask_as_four_dims(attn_mask: Tensor | None, lead: tuple[int, ...]) -> Tensor | None:
    """A mask broadcastable to ``(*lead, H, Tq, Tk)`` as one broadcastable to ``(N, H, Tq, Tk)``."""
    if attn_mask is None:
        return None
    mask = attn_mask.reshape((1,) * (len(lead) + 3 - attn_mask.dim()) + tuple(attn_mask.shape))
    if all(n == 1 for n in mask.shape[: len(lead)]):  # the same for every batch entry: stays broadcast
        return mask.reshape(1, *mask.shape[-3:])
    return mask.expand(*lead, *mask.shape[-3:]).reshape(-1, *mask.shape[-3:])
