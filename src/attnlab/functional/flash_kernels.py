"""The Triton kernels behind ``backend="flash"``; :mod:`attnlab.functional.flash` explains the algorithm.

Scores live in log2 units inside the kernels, ``s = q·k · scale · log2(e)``, so that every exponential
is a hardware ``exp2``; the saved ``lse`` is in natural units, like the ``chunked`` backend's. Every tensor
comes with its four strides ``(B, H, T, D)``: transposed or sliced inputs, and masks broadcast with
stride 0, are read where they lie. Program ids are widened to int64 before they meet a stride, so
tensors past 2³¹ elements index correctly.

Soft-capping (``SOFTCAP``): ``s = cap · tanh(q·k · scale / cap)``, then to log2 units, and in the backward passes
each ``dS`` times the slope ``1 − tanh²``. Sinks (``HAS_SINKS``): a row's running softmax starts from its head's
sink, ``m = sink``, ``l = 1``; the sink's own gradient is summed outside, from ``lse`` and ``delta``.
"""

from __future__ import annotations

import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)  # exp(x) = exp2(x · log2 e)

MASK_NONE, MASK_BOOL, MASK_FLOAT = 0, 1, 2


@triton.jit
def _load_mask(mask_base, qi, kj, t_q, t_k, stride_mq, stride_mk, other, MASK_PER_KEY: tl.constexpr):
    """The mask's block; a padding mask, the same for every query, is read as one row and broadcast."""
    if MASK_PER_KEY:
        block = tl.load(mask_base + kj * stride_mk, mask=kj < t_k, other=other)
    else:
        block = tl.load(mask_base + qi * stride_mq + kj * stride_mk, mask=(qi < t_q) & (kj < t_k), other=other)
    return block


@triton.jit
def _mask_scores(s, mask_base, qi, kj, t_q, t_k, stride_mq, stride_mk,
                 MASK_KIND: tl.constexpr, MASK_PER_KEY: tl.constexpr, IS_CAUSAL: tl.constexpr, EDGE: tl.constexpr):
    """Apply attn_mask, causality and the end of the keys to a block of log2-scores ``s``.

    ``qi`` and ``kj`` are query and key indices shaped to broadcast against ``s`` (``(BQ, 1)`` and
    ``(1, BK)``, or transposed). Only an EDGE block can cross the diagonal or the last key, so only
    there are they checked.
    """
    if MASK_KIND == 1:  # bool: True = may attend
        allowed = _load_mask(mask_base, qi, kj, t_q, t_k, stride_mq, stride_mk, 0, MASK_PER_KEY)
        s = tl.where(allowed != 0, s, float("-inf"))
    elif MASK_KIND == 2:  # float: added to the scores
        bias = _load_mask(mask_base, qi, kj, t_q, t_k, stride_mq, stride_mk, 0.0, MASK_PER_KEY)
        s = s + bias.to(tl.float32) * LOG2E
    if EDGE:
        keep = kj < t_k
        if IS_CAUSAL:
            keep = keep & (kj <= qi)  # top-left aligned: query i sees keys 0..i
        s = tl.where(keep, s, float("-inf"))
    return s


@triton.jit
def _tanh(x):
    """tanh from exp2 (the interpreter and every GPU have it): ``sign(x) · (1 − e) / (1 + e)``, ``e = exp(−2|x|)``."""
    e = tl.exp2(tl.abs(x) * (-2.0 * LOG2E))  # the tensor first: constexpr * tensor stays a constexpr
    t = (1.0 - e) / (1.0 + e)
    return tl.where(x < 0, -t, t)


@triton.jit
def _scores(q, k_t, qk_scale, cap_scale, cap_log2, SOFTCAP: tl.constexpr, PRECISION: tl.constexpr):
    """Log2-scores of a block and the soft-cap's slope ``1 − tanh²`` (without a cap: unused, the scores again)."""
    dot = tl.dot(q, k_t, input_precision=PRECISION)
    if SOFTCAP:
        t = _tanh(dot * cap_scale)
        s = t * cap_log2
        slope = 1.0 - t * t
    else:
        s = dot * qk_scale
        slope = s
    return s, slope


@triton.jit
def _load_tile(base, rows, stride_t, stride_d, t, offs_d, HEAD_DIM: tl.constexpr):
    """Rows ``rows`` of a ``(T, D)`` slice as a ``(len(rows), BLOCK_D)`` tile; zeros past T and past D."""
    ok = (rows[:, None] < t) & (offs_d[None, :] < HEAD_DIM)
    return tl.load(base + rows[:, None] * stride_t + offs_d[None, :] * stride_d, mask=ok, other=0.0)


@triton.jit
def _load_tile_t(base, rows, stride_t, stride_d, t, offs_d, HEAD_DIM: tl.constexpr):
    """The same tile transposed, ``(BLOCK_D, len(rows))``: the right-hand operand of ``q @ kᵀ``."""
    ok = (rows[None, :] < t) & (offs_d[:, None] < HEAD_DIM)
    return tl.load(base + rows[None, :] * stride_t + offs_d[:, None] * stride_d, mask=ok, other=0.0)


@triton.jit
def _query_block(BLOCK_Q: tl.constexpr, IS_CAUSAL: tl.constexpr):
    """This program's first query. Causal: last block first, as later queries see more keys and the GPU
    starts programs roughly in order, so the longest start early and short ones fill the tail."""
    block = tl.num_programs(0) - 1 - tl.program_id(0) if IS_CAUSAL else tl.program_id(0)
    return block * BLOCK_Q


# ---------------------------------------------------------------------------------------------- forward


@triton.jit
def _fwd_blocks(acc, denom, m, q, k_base, v_base, mask_base, offs_q, offs_d, lo, hi, t_q, t_k, qk_scale,
                cap_scale, cap_log2, stride_kt, stride_kd, stride_vt, stride_vd, stride_mq, stride_mk,
                HEAD_DIM: tl.constexpr, BLOCK_K: tl.constexpr, MASK_KIND: tl.constexpr,
                MASK_PER_KEY: tl.constexpr, IS_CAUSAL: tl.constexpr, EDGE: tl.constexpr,
                PRECISION: tl.constexpr, SOFTCAP: tl.constexpr):
    """Fold the key blocks ``[lo, hi)`` into one query block's running ``(acc, denom, m)``: the online softmax."""
    for block_start in range(lo, hi, BLOCK_K):
        ks = tl.multiple_of(block_start, BLOCK_K)
        offs_k = ks + tl.arange(0, BLOCK_K)
        k_t = _load_tile_t(k_base, offs_k, stride_kt, stride_kd, t_k, offs_d, HEAD_DIM)
        s, _ = _scores(q, k_t, qk_scale, cap_scale, cap_log2, SOFTCAP, PRECISION)
        s = _mask_scores(s, mask_base, offs_q[:, None], offs_k[None, :], t_q, t_k, stride_mq, stride_mk,
                         MASK_KIND, MASK_PER_KEY, IS_CAUSAL, EDGE)
        m_new = tl.maximum(m, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # nothing allowed yet: any finite shift will do
        p = tl.exp2(s - m_safe[:, None])
        alpha = tl.exp2(m - m_safe)  # rescales what was summed under the old, smaller maximum
        denom = denom * alpha + tl.sum(p, 1)
        v = _load_tile(v_base, offs_k, stride_vt, stride_vd, t_k, offs_d, HEAD_DIM)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=PRECISION)
        m = m_new
    return acc, denom, m


@triton.jit
def fwd_kernel(Q, K, V, Mask, Sinks, Out, LSE, qk_scale, cap_scale, cap_log2,
               stride_qb, stride_qh, stride_qt, stride_qd, stride_kb, stride_kh, stride_kt, stride_kd,
               stride_vb, stride_vh, stride_vt, stride_vd, stride_mb, stride_mh, stride_mq, stride_mk,
               stride_ob, stride_oh, stride_ot, stride_od,
               num_heads, group, t_q, t_k, t_q_bucket, t_k_bucket,
               HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, MASK_KIND: tl.constexpr, MASK_PER_KEY: tl.constexpr,
               IS_CAUSAL: tl.constexpr, PRECISION: tl.constexpr, SOFTCAP: tl.constexpr, HAS_SINKS: tl.constexpr,
               BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr):
    """One program = one block of BLOCK_Q queries of one (batch, head); writes ``Out`` and ``LSE (B, H, Tq)``.

    ``t_q_bucket``/``t_k_bucket`` (powers of two) only key the autotuner's cache.
    """
    bh = tl.program_id(1)
    b, h = (bh // num_heads).to(tl.int64), (bh % num_heads).to(tl.int64)
    hk = h // group  # grouped-query attention: this head's key/value head
    qs = _query_block(BLOCK_Q, IS_CAUSAL)
    offs_q = qs + tl.arange(0, BLOCK_Q)
    offs_d = tl.arange(0, BLOCK_D)
    q = _load_tile(Q + b * stride_qb + h * stride_qh, offs_q, stride_qt, stride_qd, t_q, offs_d, HEAD_DIM)
    k_base = K + b * stride_kb + hk * stride_kh
    v_base = V + b * stride_vb + hk * stride_vh
    mask_base = Mask + b * stride_mb + h * stride_mh

    m = tl.full([BLOCK_Q], float("-inf"), tl.float32)  # running maximum (log2 units)
    denom = tl.zeros([BLOCK_Q], tl.float32)  # running normaliser l = Σ exp2(s - m)
    if HAS_SINKS:  # the head's sink is every row's first score, with no value
        m = tl.zeros([BLOCK_Q], tl.float32) + tl.load(Sinks + h).to(tl.float32) * LOG2E
        denom = denom + 1.0
    acc = tl.zeros([BLOCK_Q, BLOCK_D], tl.float32)  # running Σ exp2(s - m) v
    if IS_CAUSAL:  # key blocks wholly above the diagonal are never visited
        hi = tl.minimum(qs + BLOCK_Q, t_k)
        full_end = tl.minimum(qs, t_k) // BLOCK_K * BLOCK_K  # blocks before qs are below every row's diagonal
    else:
        hi = t_k
        full_end = t_k // BLOCK_K * BLOCK_K
    args = (t_q, t_k, qk_scale, cap_scale, cap_log2, stride_kt, stride_kd, stride_vt, stride_vd, stride_mq, stride_mk)
    acc, denom, m = _fwd_blocks(acc, denom, m, q, k_base, v_base, mask_base, offs_q, offs_d, 0, full_end, *args,
                            HEAD_DIM, BLOCK_K, MASK_KIND, MASK_PER_KEY, IS_CAUSAL, False, PRECISION, SOFTCAP)
    acc, denom, m = _fwd_blocks(acc, denom, m, q, k_base, v_base, mask_base, offs_q, offs_d, full_end, hi, *args,
                            HEAD_DIM, BLOCK_K, MASK_KIND, MASK_PER_KEY, IS_CAUSAL, True, PRECISION, SOFTCAP)

    seen = denom > 0.0  # False for a query whose every key is masked: output 0, lse +inf (so backward's P = 0)
    out = acc / tl.where(seen, denom, 1.0)[:, None]
    lse = tl.where(seen, (m + tl.log2(tl.where(seen, denom, 1.0))) / LOG2E, float("inf"))
    o_ptrs = Out + b * stride_ob + h * stride_oh + offs_q[:, None] * stride_ot + offs_d[None, :] * stride_od
    tl.store(o_ptrs, out.to(Out.dtype.element_ty), mask=(offs_q[:, None] < t_q) & (offs_d[None, :] < HEAD_DIM))
    tl.store(LSE + bh.to(tl.int64) * t_q + offs_q, lse, mask=offs_q < t_q)


# --------------------------------------------------------------------------------------------- backward


@triton.jit
def delta_kernel(Out, dOut, Delta, stride_ob, stride_oh, stride_ot, stride_od,
                 stride_gb, stride_gh, stride_gt, stride_gd, num_heads, t_q,
                 HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_Q: tl.constexpr):
    """``delta = rowsum(dO ∘ O)`` per query ``(B, H, Tq)``: equals ``rowsum(dP ∘ P)``, needed by every dS."""
    bh = tl.program_id(1)
    b, h = (bh // num_heads).to(tl.int64), (bh % num_heads).to(tl.int64)
    offs_q = tl.program_id(0) * BLOCK_Q + tl.arange(0, BLOCK_Q)
    offs_d = tl.arange(0, BLOCK_D)
    o = _load_tile(Out + b * stride_ob + h * stride_oh, offs_q, stride_ot, stride_od, t_q, offs_d, HEAD_DIM)
    do = _load_tile(dOut + b * stride_gb + h * stride_gh, offs_q, stride_gt, stride_gd, t_q, offs_d, HEAD_DIM)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    tl.store(Delta + bh.to(tl.int64) * t_q + offs_q, delta, mask=offs_q < t_q)


@triton.jit
def _dkdv_blocks(dk, dv, k, v, q_base, do_base, lse_base, delta_base, mask_base, offs_k, offs_d, lo, hi,
                 t_q, t_k, qk_scale, cap_scale, cap_log2, stride_qt, stride_qd, stride_gt, stride_gd, stride_mq,
                 stride_mk, HEAD_DIM: tl.constexpr, BLOCK_Q: tl.constexpr, MASK_KIND: tl.constexpr,
                 MASK_PER_KEY: tl.constexpr, IS_CAUSAL: tl.constexpr, EDGE: tl.constexpr,
                 PRECISION: tl.constexpr, SOFTCAP: tl.constexpr):
    """Add query blocks ``[lo, hi)`` to one key block's dK, dV; transposed (keys × queries) so no P is stored."""
    for block_start in range(lo, hi, BLOCK_Q):
        qs = tl.multiple_of(block_start, BLOCK_Q)
        offs_q = qs + tl.arange(0, BLOCK_Q)
        q_t = _load_tile_t(q_base, offs_q, stride_qt, stride_qd, t_q, offs_d, HEAD_DIM)
        do = _load_tile(do_base, offs_q, stride_gt, stride_gd, t_q, offs_d, HEAD_DIM)
        lse = tl.load(lse_base + offs_q, mask=offs_q < t_q, other=float("inf")) * LOG2E  # past Tq: P = 0
        delta = tl.load(delta_base + offs_q, mask=offs_q < t_q, other=0.0)
        s_t, slope_t = _scores(k, q_t, qk_scale, cap_scale, cap_log2, SOFTCAP, PRECISION)
        s_t = _mask_scores(s_t, mask_base, offs_q[None, :], offs_k[:, None], t_q, t_k, stride_mq, stride_mk,
                           MASK_KIND, MASK_PER_KEY, IS_CAUSAL, EDGE)
        p_t = tl.exp2(s_t - lse[None, :])  # P recomputed from the saved log-sum-exp
        dv = tl.dot(p_t.to(do.dtype), do, dv, input_precision=PRECISION)
        dp_t = tl.dot(v, tl.trans(do), input_precision=PRECISION)
        ds_t = p_t * (dp_t - delta[None, :])
        if SOFTCAP:
            ds_t = ds_t * slope_t
        dk = tl.dot(ds_t.to(q_t.dtype), tl.trans(q_t), dk, input_precision=PRECISION)
    return dk, dv


@triton.jit
def dkdv_kernel(Q, K, V, Mask, dOut, LSE, Delta, dK, dV, qk_scale, scale, cap_scale, cap_log2,
                stride_qb, stride_qh, stride_qt, stride_qd, stride_kb, stride_kh, stride_kt, stride_kd,
                stride_vb, stride_vh, stride_vt, stride_vd, stride_mb, stride_mh, stride_mq, stride_mk,
                stride_gb, stride_gh, stride_gt, stride_gd,
                num_heads, num_kv_heads, group, t_q, t_k, t_q_bucket, t_k_bucket,
                HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, MASK_KIND: tl.constexpr, MASK_PER_KEY: tl.constexpr,
                IS_CAUSAL: tl.constexpr, PRECISION: tl.constexpr, SOFTCAP: tl.constexpr, HAS_SINKS: tl.constexpr,
                BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr):
    """One program = one block of BLOCK_K keys of one (batch, kv head); sums over the heads of its group.

    ``dK, dV`` are contiguous ``(B, Hkv, Tk, D)``.
    """
    bhk = tl.program_id(1)
    b, hk = (bhk // num_kv_heads).to(tl.int64), (bhk % num_kv_heads).to(tl.int64)
    ks = tl.program_id(0) * BLOCK_K
    offs_k = ks + tl.arange(0, BLOCK_K)
    offs_d = tl.arange(0, BLOCK_D)
    k = _load_tile(K + b * stride_kb + hk * stride_kh, offs_k, stride_kt, stride_kd, t_k, offs_d, HEAD_DIM)
    v = _load_tile(V + b * stride_vb + hk * stride_vh, offs_k, stride_vt, stride_vd, t_k, offs_d, HEAD_DIM)
    dk = tl.zeros([BLOCK_K, BLOCK_D], tl.float32)
    dv = tl.zeros([BLOCK_K, BLOCK_D], tl.float32)
    if IS_CAUSAL:  # query blocks wholly above the diagonal (rows < ks) are never visited
        lo = ks // BLOCK_Q * BLOCK_Q
        full_start = tl.minimum((ks + BLOCK_K - 1 + BLOCK_Q - 1) // BLOCK_Q * BLOCK_Q, t_q)  # rows past every key
    else:
        lo = 0
        full_start = 0
    args = (t_q, t_k, qk_scale, cap_scale, cap_log2, stride_qt, stride_qd, stride_gt, stride_gd, stride_mq, stride_mk)
    for g in range(group):
        h = hk * group + g
        bh = b * num_heads + h
        q_base = Q + b * stride_qb + h * stride_qh
        do_base = dOut + b * stride_gb + h * stride_gh
        mask_base = Mask + b * stride_mb + h * stride_mh
        lse_base, delta_base = LSE + bh * t_q, Delta + bh * t_q
        dk, dv = _dkdv_blocks(dk, dv, k, v, q_base, do_base, lse_base, delta_base, mask_base, offs_k, offs_d,
                              lo, full_start, *args, HEAD_DIM, BLOCK_Q, MASK_KIND, MASK_PER_KEY, IS_CAUSAL,
                              True, PRECISION, SOFTCAP)
        dk, dv = _dkdv_blocks(dk, dv, k, v, q_base, do_base, lse_base, delta_base, mask_base, offs_k, offs_d,
                              full_start, t_q, *args, HEAD_DIM, BLOCK_Q, MASK_KIND, MASK_PER_KEY, IS_CAUSAL,
                              False, PRECISION, SOFTCAP)
    ok = (offs_k[:, None] < t_k) & (offs_d[None, :] < HEAD_DIM)
    rows = (bhk.to(tl.int64) * t_k + offs_k[:, None]) * HEAD_DIM + offs_d[None, :]
    tl.store(dK + rows, (dk * scale).to(dK.dtype.element_ty), mask=ok)
    tl.store(dV + rows, dv.to(dV.dtype.element_ty), mask=ok)


@triton.jit
def _dq_blocks(dq, q, do, lse, delta, k_base, v_base, mask_base, offs_q, offs_d, lo, hi, t_q, t_k, qk_scale,
               cap_scale, cap_log2, stride_kt, stride_kd, stride_vt, stride_vd, stride_mq, stride_mk,
               HEAD_DIM: tl.constexpr, BLOCK_K: tl.constexpr, MASK_KIND: tl.constexpr,
               MASK_PER_KEY: tl.constexpr, IS_CAUSAL: tl.constexpr, EDGE: tl.constexpr,
               PRECISION: tl.constexpr, SOFTCAP: tl.constexpr):
    """Add key blocks ``[lo, hi)`` to one query block's dQ (before the final · scale)."""
    for block_start in range(lo, hi, BLOCK_K):
        ks = tl.multiple_of(block_start, BLOCK_K)
        offs_k = ks + tl.arange(0, BLOCK_K)
        k_t = _load_tile_t(k_base, offs_k, stride_kt, stride_kd, t_k, offs_d, HEAD_DIM)
        v_t = _load_tile_t(v_base, offs_k, stride_vt, stride_vd, t_k, offs_d, HEAD_DIM)
        s, slope = _scores(q, k_t, qk_scale, cap_scale, cap_log2, SOFTCAP, PRECISION)
        s = _mask_scores(s, mask_base, offs_q[:, None], offs_k[None, :], t_q, t_k, stride_mq, stride_mk,
                         MASK_KIND, MASK_PER_KEY, IS_CAUSAL, EDGE)
        p = tl.exp2(s - lse[:, None])
        dp = tl.dot(do, v_t, input_precision=PRECISION)
        ds = p * (dp - delta[:, None])
        if SOFTCAP:
            ds = ds * slope
        dq = tl.dot(ds.to(k_t.dtype), tl.trans(k_t), dq, input_precision=PRECISION)
    return dq


@triton.jit
def dq_kernel(Q, K, V, Mask, dOut, LSE, Delta, dQ, qk_scale, scale, cap_scale, cap_log2,
              stride_qb, stride_qh, stride_qt, stride_qd, stride_kb, stride_kh, stride_kt, stride_kd,
              stride_vb, stride_vh, stride_vt, stride_vd, stride_mb, stride_mh, stride_mq, stride_mk,
              stride_gb, stride_gh, stride_gt, stride_gd,
              num_heads, group, t_q, t_k, t_q_bucket, t_k_bucket,
              HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, MASK_KIND: tl.constexpr, MASK_PER_KEY: tl.constexpr,
              IS_CAUSAL: tl.constexpr, PRECISION: tl.constexpr, SOFTCAP: tl.constexpr, HAS_SINKS: tl.constexpr,
              BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr):
    """One program = one block of BLOCK_Q queries of one (batch, head); ``dQ`` is contiguous ``(B, H, Tq, D)``."""
    bh = tl.program_id(1)
    b, h = (bh // num_heads).to(tl.int64), (bh % num_heads).to(tl.int64)
    hk = h // group
    qs = _query_block(BLOCK_Q, IS_CAUSAL)
    offs_q = qs + tl.arange(0, BLOCK_Q)
    offs_d = tl.arange(0, BLOCK_D)
    q = _load_tile(Q + b * stride_qb + h * stride_qh, offs_q, stride_qt, stride_qd, t_q, offs_d, HEAD_DIM)
    do = _load_tile(dOut + b * stride_gb + h * stride_gh, offs_q, stride_gt, stride_gd, t_q, offs_d, HEAD_DIM)
    lse = tl.load(LSE + bh.to(tl.int64) * t_q + offs_q, mask=offs_q < t_q, other=float("inf")) * LOG2E
    delta = tl.load(Delta + bh.to(tl.int64) * t_q + offs_q, mask=offs_q < t_q, other=0.0)
    k_base = K + b * stride_kb + hk * stride_kh
    v_base = V + b * stride_vb + hk * stride_vh
    mask_base = Mask + b * stride_mb + h * stride_mh
    dq = tl.zeros([BLOCK_Q, BLOCK_D], tl.float32)
    if IS_CAUSAL:
        hi = tl.minimum(qs + BLOCK_Q, t_k)
        full_end = tl.minimum(qs, t_k) // BLOCK_K * BLOCK_K
    else:
        hi = t_k
        full_end = t_k // BLOCK_K * BLOCK_K
    args = (t_q, t_k, qk_scale, cap_scale, cap_log2, stride_kt, stride_kd, stride_vt, stride_vd, stride_mq, stride_mk)
    dq = _dq_blocks(dq, q, do, lse, delta, k_base, v_base, mask_base, offs_q, offs_d, 0, full_end, *args,
                    HEAD_DIM, BLOCK_K, MASK_KIND, MASK_PER_KEY, IS_CAUSAL, False, PRECISION, SOFTCAP)
    dq = _dq_blocks(dq, q, do, lse, delta, k_base, v_base, mask_base, offs_q, offs_d, full_end, hi, *args,
                    HEAD_DIM, BLOCK_K, MASK_KIND, MASK_PER_KEY, IS_CAUSAL, True, PRECISION, SOFTCAP)
    ok = (offs_q[:, None] < t_q) & (offs_d[None, :] < HEAD_DIM)
    rows = (bh.to(tl.int64) * t_q + offs_q[:, None]) * HEAD_DIM + offs_d[None, :]
    tl.store(dQ + rows, (dq * scale).to(dQ.dtype.element_ty), mask=ok)


# ------------------------------------------------------------------------------------------ launch configs

# Triton's interpreter runs each tile op through NumPy: a kernel built by it is a CPU test double.
INTERPRETED = type(fwd_kernel).__name__ == "InterpretedFunction"


def _configs(shapes: tuple[tuple[int, int, int, int], ...]) -> list[triton.Config]:
    return [triton.Config({"BLOCK_Q": bq, "BLOCK_K": bk}, num_warps=warps, num_stages=stages)
            for bq, bk, warps, stages in shapes]


# (BLOCK_Q, BLOCK_K, num_warps, num_stages): large query tiles for the passes that loop over keys, large key tiles
# for the one that loops over queries (FlashAttention-2's choice). Chosen by compiling for sm_90 (H100): each of the
# larger ones runs without register spills at head_dim 64 or 128 or both; the small ones serve head_dim > 128 and
# short sequences (one decoding step has Tq = 1).
FWD_CONFIGS = _configs(((128, 64, 8, 3), (128, 64, 8, 4), (128, 128, 8, 3), (128, 32, 4, 3), (64, 64, 4, 3),
                        (64, 32, 8, 2), (32, 64, 4, 3), (32, 32, 4, 2)))
DKDV_CONFIGS = _configs(((32, 64, 8, 3), (32, 128, 8, 3), (16, 128, 8, 3), (16, 64, 4, 3), (32, 32, 8, 2),
                         (16, 32, 4, 2)))
DQ_CONFIGS = _configs(((128, 32, 8, 3), (128, 64, 8, 3), (64, 64, 4, 3), (64, 32, 4, 3), (32, 32, 8, 2),
                       (32, 16, 4, 2)))
# Under the interpreter: one small config, so tests on short sequences still cross several blocks.
INTERPRETER_META = {"BLOCK_Q": 16, "BLOCK_K": 32}


def _prune(configs: list[triton.Config], named_args: dict, **kwargs: object) -> list[triton.Config]:
    """Drop tiles far longer than the sequences, and big tiles where registers run short: heads wider than 128,
    and float32, whose IEEE dot products run on the FMA units with four-byte operands."""
    args = {**named_args, **kwargs}  # the autotuner hands positional and keyword arguments apart
    tight = (args["HEAD_DIM"] > 128) + (args["PRECISION"] == "ieee")
    area = (128 * 128, 64 * 32, 32 * 32)[tight]  # largest BLOCK_Q · BLOCK_K
    kept = [c for c in configs if c.kwargs["BLOCK_Q"] <= max(args["t_q_bucket"], 32)
            and c.kwargs["BLOCK_K"] <= max(args["t_k_bucket"], 32) and _area(c) <= area]
    return kept or [min(configs, key=_area)]


def _area(config: triton.Config) -> int:
    return config.kwargs["BLOCK_Q"] * config.kwargs["BLOCK_K"]


def _tuned(kernel, configs: list[triton.Config]):
    """The kernel autotuned per head size, mask kind, causality, precision and power-of-two sequence lengths."""
    if INTERPRETED:
        return kernel
    key = ["HEAD_DIM", "MASK_KIND", "IS_CAUSAL", "PRECISION", "SOFTCAP", "t_q_bucket", "t_k_bucket"]
    return triton.autotune(configs, key=key, prune_configs_by={"early_config_prune": _prune})(kernel)


fwd = _tuned(fwd_kernel, FWD_CONFIGS)
dkdv = _tuned(dkdv_kernel, DKDV_CONFIGS)
dq = _tuned(dq_kernel, DQ_CONFIGS)
META = INTERPRETER_META if INTERPRETED else {}  # what the launch passes; the autotuner picks otherwise
