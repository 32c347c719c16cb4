"""Memory-efficient attention in NumPy: an online softmax over blocks of keys (Milakov & Gimelshein
2018; Rabe & Staats 2021; the idea behind FlashAttention), the twin of
:mod:`attnlab.functional.chunked`'s forward pass.

Queries are taken ``block_q`` at a time and keys ``block_k`` at a time; for each query row a running
maximum ``m``, normaliser ``l = Σ exp(s - m)`` and weighted sum ``acc = Σ exp(s - m) v`` are kept.
When a block raises the maximum, ``l`` and ``acc`` are rescaled by ``exp(m_old - m_new)``; at the
end ``out = acc / l``. Extra memory is O(block_q · block_k) per head instead of O(Tq · Tk).
"""

from __future__ import annotations

import numpy as np

# Larger than torch's blocks: each block costs a few Python-level NumPy calls, so fewer, bigger
# blocks keep that overhead small while a block of scores still fits in cache-friendly sizes.
BLOCK_Q = 512
BLOCK_K = 1024


def _cut(mask: np.ndarray, qs: int, qe: int, ks: int, ke: int) -> np.ndarray:
    """The ``[qs:qe, ks:ke]`` block of a broadcastable mask (a dim of size 1 stays as it is)."""
    if mask.shape[-2] != 1:
        mask = mask[..., qs:qe, :]
    if mask.shape[-1] != 1:
        mask = mask[..., ks:ke]
    return mask


def _block_scores(q_blk, k_blk, mask, is_causal, qs, qe, ks, ke, buf) -> np.ndarray:
    """Scores of one block, ``q_blk`` already scaled: ``(..., qe-qs, ke-ks)``, masked with -inf.

    Written into ``buf`` when the block has its full size: a fresh multi-MiB array per block would
    be faulted in page by page every time, which costs as much as the matmul itself.
    """
    full_block = buf is not None and buf.shape[-2:] == (qe - qs, ke - ks)
    s = np.matmul(q_blk, np.swapaxes(k_blk, -1, -2), out=buf if full_block else None)
    neg_inf = s.dtype.type(-np.inf)
    if mask is not None:
        m = _cut(mask, qs, qe, ks, ke)
        full = tuple(np.broadcast_shapes(m.shape, s.shape))
        if full != s.shape:
            s = np.broadcast_to(s, full).copy()
        if m.dtype == np.bool_:
            np.copyto(s, neg_inf, where=~m)
        else:
            s += m.astype(s.dtype, copy=False)
    if is_causal and ke - 1 > qs:  # the block reaches above the diagonal
        above = np.arange(ks, ke)[None, :] > np.arange(qs, qe)[:, None]
        np.copyto(s, neg_inf, where=above)
    return s


def chunked_attention(query: np.ndarray, key: np.ndarray, value: np.ndarray, attn_mask: np.ndarray | None,
                      is_causal: bool, scale: float, block_q: int = BLOCK_Q, block_k: int = BLOCK_K) -> np.ndarray:
    """Memory-efficient attention ``(..., Tq, Dv)``; same result as the math path, never builds ``(Tq, Tk)``."""
    batch = tuple(np.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2]))
    if attn_mask is not None:
        batch = tuple(np.broadcast_shapes(batch, attn_mask.shape[:-2]))
    t_q, t_k, d_v = query.shape[-2], key.shape[-2], value.shape[-1]
    dtype = query.dtype
    out = np.zeros((*batch, t_q, d_v), dtype=dtype)
    qk_batch = tuple(np.broadcast_shapes(query.shape[:-2], key.shape[:-2]))
    buf = np.empty((*qk_batch, min(block_q, t_q), min(block_k, t_k)), dtype=dtype)  # reused by every block
    for qs in range(0, t_q, block_q):
        qe = min(qs + block_q, t_q)
        q_blk = query[..., qs:qe, :] * dtype.type(scale)
        m = np.full((*batch, qe - qs, 1), -np.inf, dtype=dtype)
        denom = np.zeros((*batch, qe - qs, 1), dtype=dtype)
        acc = np.zeros((*batch, qe - qs, d_v), dtype=dtype)
        # With a top-left causal mask, a query block ending at qe needs keys < qe only.
        key_end = min(qe, t_k) if is_causal else t_k
        for ks in range(0, key_end, block_k):
            ke = min(ks + block_k, t_k)
            s = _block_scores(q_blk, key[..., ks:ke, :], attn_mask, is_causal, qs, qe, ks, ke, buf)
            m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
            m_safe = np.where(np.isneginf(m_new), dtype.type(0.0), m_new)  # nothing seen yet: any finite shift
            s -= m_safe
            p = np.exp(s, out=s)
            alpha = np.exp(m - m_safe)
            denom *= alpha
            denom += p.sum(axis=-1, keepdims=True)
            acc *= alpha
            acc += np.matmul(p, value[..., ks:ke, :])
            m = m_new
        # A row that saw no key has denom 0 and acc 0: divide by 1 so it stays 0.
        out[..., qs:qe, :] = acc / np.where(denom > 0, denom, dtype.type(1.0))
    return out
