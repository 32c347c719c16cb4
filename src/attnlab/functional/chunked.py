"""Memory-efficient attention: an online softmax over blocks of keys (Milakov & Gimelshein 2018;
Rabe & Staats 2021; the idea behind FlashAttention), written in plain PyTorch.

The full ``(Tq, Tk)`` score matrix is never built. Queries are taken ``block_q`` at a time and keys
``block_k`` at a time; for each query row we keep a running maximum ``m``, a running normaliser
``l = Σ exp(s - m)`` and a running weighted sum ``acc = Σ exp(s - m) v``. When a new block raises the
maximum, the old ``l`` and ``acc`` are rescaled by ``exp(m_old - m_new)``. At the end ``out = acc / l``.
Extra memory per head is O(block_q · block_k) instead of O(Tq · Tk).

The backward pass recomputes each block's probabilities from the saved log-sum-exp
``lse = m + log l`` (one number per query) rather than storing them:
``P = exp(S - lse)``, ``dV += Pᵀ dO``, ``dP = dO Vᵀ``, ``dS = P ∘ (dP - rowsum(dO ∘ O))``,
``dQ += dS K · scale``, ``dK += dSᵀ Q · scale``.

Soft-capping ``s = cap · tanh(r / cap)`` multiplies each ``dS`` by its slope ``1 − tanh²``. A sink (one logit per
head) starts each row's running softmax: ``m = sink``, ``l = 1``, ``acc = 0``; its gradient is
``−Σ exp(sink − lse) · rowsum(dO ∘ O)`` over the rows of its head.
"""

from __future__ import annotations

import torch
from torch import Tensor

from attnlab.arguments import broadcast_shapes

BLOCK_Q = 128
BLOCK_K = 256


def _cut(mask: Tensor, qs: int, qe: int, ks: int, ke: int) -> Tensor:
    """The ``[qs:qe, ks:ke]`` block of a broadcastable mask (a dim of size 1 stays as it is)."""
    if mask.shape[-2] != 1:
        mask = mask[..., qs:qe, :]
    if mask.shape[-1] != 1:
        mask = mask[..., ks:ke]
    return mask


def _block_scores(q_blk: Tensor, k_blk: Tensor, mask: Tensor | None, is_causal: bool,
                  qs: int, qe: int, ks: int, ke: int, softcap: float | None = None) -> tuple[Tensor, Tensor | None]:
    """Scores of one block, ``q_blk`` already scaled: ``(..., qe-qs, ke-ks)``, soft-capped, masked with -inf; and
    the cap's slope ``1 − tanh²`` (None without a cap)."""
    s = q_blk @ k_blk.transpose(-2, -1)
    slope = None
    if softcap is not None:
        t = torch.tanh(s / softcap)
        s, slope = t * softcap, 1.0 - t * t
    if mask is not None:
        m = _cut(mask, qs, qe, ks, ke)
        s = s + m.to(s.dtype) if m.dtype != torch.bool else s.masked_fill(~m, float("-inf"))
    if is_causal and ke - 1 > qs:  # the block reaches above the diagonal
        rows = torch.arange(qs, qe, device=s.device)[:, None]
        cols = torch.arange(ks, ke, device=s.device)[None, :]
        s = s.masked_fill_(cols > rows, float("-inf"))
    return s, slope


def _keep(like: Tensor, p: float, seed: int, block: int) -> Tensor:
    """The dropout keep-mask of one block, scaled by 1/(1-p); regenerated identically in backward."""
    g = torch.Generator(device=like.device)
    g.manual_seed(seed + block)
    keep = torch.rand(like.shape, generator=g, device=like.device, dtype=like.dtype) >= p
    return keep.to(like.dtype) / (1.0 - p)


def _key_end(is_causal: bool, qe: int, t_k: int) -> int:
    # With a top-left causal mask, query i sees keys 0..i, so a query block ending at qe needs keys < qe.
    return min(qe, t_k) if is_causal else t_k


def _forward(q, k, v, mask, is_causal, scale, dropout_p, seed, bq, bk, softcap=None, sinks=None):
    batch = broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    t_q, t_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    out = q.new_zeros(*batch, t_q, d_v)
    lse = q.new_full((*batch, t_q, 1), float("inf"))  # +inf marks rows with nothing to attend to
    n_kb = (t_k + bk - 1) // bk
    for qi, qs in enumerate(range(0, t_q, bq)):
        qe = min(qs + bq, t_q)
        q_blk = q[..., qs:qe, :] * scale
        m = q.new_full((*batch, qe - qs, 1), float("-inf"))
        denom = q.new_zeros(*batch, qe - qs, 1)
        if sinks is not None:  # the sink is the row's first "score", with no value: exp(sink - m) joins l only
            m, denom = m.copy_(sinks.view(-1, 1, 1)), denom.fill_(1.0)  # (H, 1, 1): heads are dim -3
        acc = q.new_zeros(*batch, qe - qs, d_v)
        for ks in range(0, _key_end(is_causal, qe, t_k), bk):
            ke = min(ks + bk, t_k)
            s, _ = _block_scores(q_blk, k[..., ks:ke, :], mask, is_causal, qs, qe, ks, ke, softcap)
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
            m_safe = m_new.masked_fill(m_new == float("-inf"), 0.0)  # nothing seen yet: any finite shift
            p = s.sub_(m_safe).exp_()
            alpha = (m - m_safe).exp_()
            denom = denom.mul_(alpha).add_(p.sum(dim=-1, keepdim=True))
            if dropout_p > 0.0:
                p = p * _keep(p, dropout_p, seed, qi * n_kb + ks // bk)
            acc = acc.mul_(alpha).add_(p @ v[..., ks:ke, :])
            m = m_new
        seen = denom > 0
        out[..., qs:qe, :] = acc / denom.masked_fill(~seen, 1.0)
        lse[..., qs:qe, :] = torch.where(seen, m.masked_fill(~seen, 0.0) + denom.masked_fill(~seen, 1.0).log(),
                                         float("inf"))
    return out, lse


def _backward(q, k, v, mask, is_causal, scale, dropout_p, seed, bq, bk, out, lse, d_out, softcap=None, sinks=None):
    batch = out.shape[:-2]
    t_q, t_k = q.shape[-2], k.shape[-2]
    dq = q.new_zeros(*batch, t_q, q.shape[-1])
    dk = k.new_zeros(*batch, t_k, k.shape[-1])
    dv = v.new_zeros(*batch, t_k, v.shape[-1])
    delta = (d_out * out).sum(dim=-1, keepdim=True)  # rowsum(dO ∘ O) = rowsum(dP ∘ P), even with dropout
    n_kb = (t_k + bk - 1) // bk
    for qi, qs in enumerate(range(0, t_q, bq)):
        qe = min(qs + bq, t_q)
        q_blk, do_blk = q[..., qs:qe, :] * scale, d_out[..., qs:qe, :]
        for ks in range(0, _key_end(is_causal, qe, t_k), bk):
            ke = min(ks + bk, t_k)
            k_blk, v_blk = k[..., ks:ke, :], v[..., ks:ke, :]
            s, slope = _block_scores(q_blk, k_blk, mask, is_causal, qs, qe, ks, ke, softcap)
            p = s.sub_(lse[..., qs:qe, :]).exp_()
            dp = do_blk @ v_blk.transpose(-2, -1)
            p_used = p
            if dropout_p > 0.0:
                keep = _keep(p, dropout_p, seed, qi * n_kb + ks // bk)
                p_used, dp = p * keep, dp * keep
            dv[..., ks:ke, :] += p_used.transpose(-2, -1) @ do_blk
            ds = p.mul_(dp.sub_(delta[..., qs:qe, :]))
            if slope is not None:
                ds = ds.mul_(slope)
            dq[..., qs:qe, :] += (ds @ k_blk) * scale
            dk[..., ks:ke, :] += ds.transpose(-2, -1) @ q_blk
    d_sinks = None
    if sinks is not None:  # the sink's share of each row, exp(sink - lse), times -rowsum(dO ∘ O), summed per head
        share = (sinks.to(lse.dtype).view(-1, 1, 1) - lse).exp()
        d_sinks = -(share * delta).transpose(-3, 0).reshape(sinks.shape[0], -1).sum(-1).to(sinks.dtype)
    return dq.sum_to_size(q.shape), dk.sum_to_size(k.shape), dv.sum_to_size(v.shape), d_sinks


class ChunkedAttention(torch.autograd.Function):
    """``autograd.Function`` wrapper: saves only q, k, v, out and the per-row log-sum-exp."""

    @staticmethod
    def forward(ctx, q, k, v, mask, is_causal, scale, dropout_p, seed, bq, bk, softcap, sinks):
        out, lse = _forward(q, k, v, mask, is_causal, scale, dropout_p, seed, bq, bk, softcap, sinks)
        ctx.save_for_backward(q, k, v, mask, out, lse, sinks)
        ctx.args = (is_causal, scale, dropout_p, seed, bq, bk)
        ctx.softcap = softcap
        return out

    @staticmethod
    def backward(ctx, d_out):
        q, k, v, mask, out, lse, sinks = ctx.saved_tensors
        dq, dk, dv, d_sinks = _backward(q, k, v, mask, *ctx.args, out, lse, d_out.contiguous(), ctx.softcap, sinks)
        return dq, dk, dv, None, None, None, None, None, None, None, None, d_sinks


def chunked_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None, is_causal: bool,
                      dropout_p: float, scale: float, block_q: int = BLOCK_Q, block_k: int = BLOCK_K,
                      softcap: float | None = None, sinks: Tensor | None = None) -> Tensor:
    """Memory-efficient attention ``(..., Tq, Dv)``; same result as the math path, never builds ``(Tq, Tk)``.
    ``softcap``: scores ``cap · tanh(s / cap)``; ``sinks`` ``(H,)``: one logit per head in every row's softmax.

    Dropout masks are drawn per block from a seed taken from torch's global RNG, so
    ``torch.manual_seed`` makes them repeatable and the backward pass can regenerate them.
    """
    if attn_mask is not None and attn_mask.requires_grad:
        raise ValueError("backend='chunked' does not differentiate attn_mask; use backend='math' or 'sdpa'")
    seed = int(torch.randint(0, 2**62, (1,)).item()) if dropout_p > 0.0 else 0
    return ChunkedAttention.apply(query, key, value, attn_mask, is_causal, scale, dropout_p, seed,
                                  block_q, block_k, softcap, sinks)
