"""The gated delta rule (Yang, Kautz & Hatamizadeh, 2024, "Gated Delta Networks", arXiv:2412.06464): the memory of
Gated DeltaNet (Qwen3-Next, Qwen3.5) and, with one decay per key channel, of Kimi Delta Attention (Kimi Linear).

Softmax attention keeps every key and value and reads them all for each new query: its cache grows with the length.
A linear-attention layer keeps one matrix instead, a *memory* ``S`` (``d_v × d_k`` per head), updated once per token
and read by the query. The delta rule updates it like one step of online regression: the memory predicts the value
of the new key, ``S k``, and is corrected along ``k`` by a step ``β`` towards the value actually given; the gate
``α`` lets the whole memory fade first:

    S_t = α_t S_{t−1} (I − β_t k_t k_tᵀ) + β_t v_t k_tᵀ        = α_t S_{t−1} + β_t (v_t − α_t S_{t−1} k_t) k_tᵀ
    o_t = S_t q_t

``α_t ∈ (0, 1]`` is given as its logarithm (``log_decay``, ≤ 0), one per head and token (Gated DeltaNet) or one per
head, token and key channel (KDA: ``S_{t−1} Diag(α_t)``, each key feature forgetting at its own rate). With unit
keys, ``β = 1`` overwrites what the memory held for ``k``; ``β = 0`` leaves it.

Two ways to compute it, proven equal in the tests (float32 ≤ 1e-5, any chunk size, any length):

* :func:`delta_rule_recurrent`: the formula above, one token at a time (the textbook; what a decoding step runs).
  T sequential steps, each a few ``d_k × d_v`` products.
* :func:`delta_rule_chunked`: the same numbers, a chunk of ``C`` tokens at a time (training and prefill). Inside a
  chunk the T sequential corrections become one triangular solve (the "WY" or "UT" form of a product of
  Householder-like factors), so the work is ``T / C`` sequential steps of ``C × C`` and ``C × d`` products.

**The chunked form.** The code keeps the memory transposed, ``M = Sᵀ`` (``d_k × d_v``: keys in its rows), so a
chunk's queries and keys ``(C, d_k)`` multiply it as rows, ``Q M``. Write ``D_t = Diag(α_t)`` (α_t times I for one
decay per head) and ``u_t = β_t (v_t − M_{t−1}ᵀ D_t k_t)``, the correction the token writes; the update is then

    M_t = D_t M_{t−1} + k_t u_tᵀ.

Inside a chunk that starts from ``M₀``, let ``G_t = Σ_{s ≤ t} log α_s`` (the log of the decay from the chunk's
start to token t, per channel) and ``Γ_t = exp(G_t)``. Unrolled,

    M_t = Γ_t ⊙ M₀ + Σ_{s ≤ t} (e^{G_t − G_s} ⊙ k_s) u_sᵀ                 (⊙: row c times the channel's factor)

and putting it into ``u_t``'s definition gives a lower-triangular system for the chunk's corrections U (``C × d_v``):

    u_t + Σ_{s < t} A_ts u_s = β_t v_t − β_t (Γ_t ⊙ k_t)ᵀ M₀,     A_ts = β_t Σ_c k_tc k_sc e^{G_tc − G_sc}

    (I + A) U = β V − β (Γ ⊙ K) M₀   ⇒   U = U₀ − W M₀,   U₀ = (I + A)⁻¹ β V,   W = (I + A)⁻¹ β (Γ ⊙ K)

``U₀`` and ``W`` do not depend on the state: they are computed for every chunk at once (the parallel part). Then,
chunk after chunk, the state enters:

    O   = (Γ ⊙ Q) M₀ + P U,      P_ts = Σ_c q_tc k_sc e^{G_tc − G_sc} for s ≤ t, 0 above
    M_C = Γ_C ⊙ M₀ + (e^{G_C − G} ⊙ K)ᵀ U

Every exponent there is ``G_t − G_s`` with ``s ≤ t``, a decay, never above 0: nothing overflows however strong the
gates. With one decay per head the sums over c factor out, ``A_ts = β_t (k_t · k_s) e^{G_t − G_s}``: ``C × C``
matrices; per channel (KDA) the factor stays inside the sum, ``C × C × d_k``.

**What a linear-attention layer has instead of attention weights.** There is no softmax, but the map from values to
outputs is still linear: from a zero state, one chunk as long as the sequence gives ``O = P (I + A)⁻¹ Diag(β) V``, a
``T × T`` lower-triangular matrix times the values (:func:`delta_rule_weights`). Its rows do not sum to 1 and may
be negative: it is the layer's *implicit* attention, what ``return_weights`` gives for these layers.

All of it in float32 (the callers cast), as transformers and the fla kernels compute it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor


def l2_normalise(x: Tensor, eps: float = 1e-6) -> Tensor:
    """``x / √(Σ x² + eps)`` over the last dim: unit queries and keys, so that ``k kᵀ`` is a projection and a step
    ``β ≤ 1`` cannot blow the memory up (fla's and transformers' form: eps inside the root)."""
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


def _check(q: Tensor, k: Tensor, v: Tensor, log_decay: Tensor, beta: Tensor, state: Tensor | None,
           owner: str) -> None:
    if q.dim() != 4 or q.shape != k.shape or v.dim() != 4 or v.shape[:3] != k.shape[:3]:
        raise ValueError(f"{owner}: q and k must be (B, H, T, d_k) and v (B, H, T, d_v), got q {tuple(q.shape)}, "
                         f"k {tuple(k.shape)}, v {tuple(v.shape)}")
    if beta.shape != k.shape[:3]:
        raise ValueError(f"{owner}: beta must be (B, H, T) = {tuple(k.shape[:3])}, got {tuple(beta.shape)}")
    if log_decay.shape not in (k.shape[:3], k.shape):
        raise ValueError(f"{owner}: log_decay must be (B, H, T) (one decay per head) or (B, H, T, d_k) (one per key "
                         f"channel) = {tuple(k.shape[:3])} or {tuple(k.shape)}, got {tuple(log_decay.shape)}")
    want = (*k.shape[:2], k.shape[-1], v.shape[-1])
    if state is not None and tuple(state.shape) != want:
        raise ValueError(f"{owner}: state must be (B, H, d_k, d_v) = {want}, got {tuple(state.shape)}")


def _channels(decay: Tensor, like: Tensor) -> Tensor:
    """A decay ``(..., T)`` or ``(..., T, d_k)`` as a factor on the rows of ``(..., T, d_k)`` tensors."""
    return decay[..., None] if decay.dim() == like.dim() - 1 else decay


def delta_rule_recurrent(q: Tensor, k: Tensor, v: Tensor, log_decay: Tensor, beta: Tensor,
                         state: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """The gated delta rule, one token at a time: the formula as written.

    Args:
        q, k: ``(B, H, T, d_k)`` queries and keys (unit keys in every model that uses it).
        v: ``(B, H, T, d_v)``.
        log_decay: ``log α``, ``(B, H, T)`` (one gate per head) or ``(B, H, T, d_k)`` (per key channel), ≤ 0.
        beta: ``(B, H, T)`` the step sizes, in (0, 1).
        state: ``(B, H, d_k, d_v)`` the memory before the first token, ``Sᵀ`` (None: zeros).

    Returns:
        ``o (B, H, T, d_v)`` and the memory after the last token ``(B, H, d_k, d_v)``.
    """
    _check(q, k, v, log_decay, beta, state, "delta_rule_recurrent")
    b, h, t, d_k = k.shape
    memory = q.new_zeros(b, h, d_k, v.shape[-1]) if state is None else state  # M = Sᵀ: key channels in rows
    outputs = []
    for i in range(t):
        q_i, k_i, v_i, beta_i = q[:, :, i], k[:, :, i], v[:, :, i], beta[:, :, i, None]  # (B, H, d) and (B, H, 1)
        memory = memory * _channels(log_decay[:, :, i].exp(), k_i)[..., None]  # forget: S ← S Diag(α)
        predicted = torch.einsum("bhk,bhkv->bhv", k_i, memory)                   # what the memory holds for k: S k
        correction = beta_i * (v_i - predicted)                                   # a step β towards v
        memory = memory + torch.einsum("bhk,bhv->bhkv", k_i, correction)        # S ← S + β (v − S k) kᵀ
        outputs.append(torch.einsum("bhk,bhkv->bhv", q_i, memory))               # o = S q
    return torch.stack(outputs, dim=2), memory


def decayed_products(rows: Sequence[Tensor], b: Tensor, log_decay_sum: Tensor) -> list[Tensor]:
    """``X_ts = Σ_c a_tc b_sc e^{G_tc − G_sc}`` for ``s ≤ t`` and 0 above, within each chunk, for each ``a`` of
    ``rows``: ``a, b (..., C, d_k)``, ``G (..., C)`` (one decay per head) or ``(..., C, d_k)`` -> ``(..., C, C)``
    each. Each exponent is a decay (≤ 0). The decays are read once for every ``a`` (the keys and the queries)."""
    if log_decay_sum.dim() == b.dim() - 1:  # one decay per head: it factors out of the sum over channels
        c = b.shape[-2]
        above = torch.ones(c, c, dtype=torch.bool, device=b.device).triu(1)
        gaps = log_decay_sum[..., :, None] - log_decay_sum[..., None, :]
        factor = gaps.masked_fill(above, float("-inf")).exp()
        return [(a @ b.transpose(-1, -2)) * factor for a in rows]
    return _per_channel_products(rows, b, log_decay_sum)


def _per_channel_products(rows: Sequence[Tensor], b: Tensor, G: Tensor, block: int = 8) -> list[Tensor]:
    """:func:`decayed_products` with a decay per channel, ``block`` rows ``t`` at a time. Between a row and an
    earlier block the decay splits at the row's block start ``r`` (``s < r ≤ t``): ``e^{G_t − G_s} = e^{G_t − G_r}
    e^{G_r − G_s}``, both factors ≤ 1, so that part is one matrix product of rescaled rows (no overflow, unlike
    ``e^{G_t} e^{−G_s}`` over a whole chunk); only the diagonal blocks keep the pairwise form
    ``(block, block, d_k)``."""
    c = b.shape[-2]
    out = [b.new_zeros(*a.shape[:-1], c) for a in rows]  # (..., C, C) each
    for start in range(0, c, block):
        end = min(start + block, c)
        g, g_r = G[..., start:end, :], G[..., start:start + 1, :]  # (..., n, d_k), the block's start (..., 1, d_k)
        above = torch.ones(end - start, end - start, dtype=torch.bool, device=b.device).triu(1)
        gaps = (g[..., :, None, :] - g[..., None, :, :]).masked_fill(above[..., None], float("-inf"))
        decayed_keys = gaps.exp() * b[..., None, start:end, :]  # (..., n, n, d_k): e^{G_t − G_s} ⊙ b_s
        earlier = b[..., :start, :] * (g_r - G[..., :start, :]).exp()  # e^{G_r − G_s} ⊙ b_s for s < r
        for x, a in zip(out, rows, strict=True):
            x[..., start:end, start:end] = (decayed_keys @ a[..., start:end, :, None]).squeeze(-1)
            x[..., start:end, :start] = (a[..., start:end, :] * (g - g_r).exp()) @ earlier.transpose(-1, -2)
    return out


def _within_chunks(q: Tensor, k: Tensor, G: Tensor, beta: Tensor) -> tuple[Tensor, Tensor]:
    """``I + A`` (unit lower triangular) and ``P`` of every chunk at once, ``(..., C, C)`` each."""
    keys, queries = decayed_products((k, q), k, G)
    c = k.shape[-2]
    system = (beta[..., None] * keys).tril(-1) + torch.eye(c, dtype=keys.dtype, device=keys.device)
    return system, queries


def _solve(system: Tensor, rhs: Tensor) -> Tensor:
    """``(I + A)⁻¹ rhs`` by forward substitution (``I + A`` is unit lower triangular)."""
    return torch.linalg.solve_triangular(system, rhs, upper=False, unitriangular=True)


def delta_rule_chunked(q: Tensor, k: Tensor, v: Tensor, log_decay: Tensor, beta: Tensor,
                       state: Tensor | None = None, chunk_size: int = 64) -> tuple[Tensor, Tensor]:
    """The gated delta rule, ``chunk_size`` tokens at a time (the derivation: the module docstring); the arguments
    and results of :func:`delta_rule_recurrent`, equal to it.

    A length that is not a multiple of the chunk is padded at the end with tokens that change nothing (zero key,
    value and query, ``β = 0``, ``log α = 0``), and their outputs dropped.
    """
    _check(q, k, v, log_decay, beta, state, "delta_rule_chunked")
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"delta_rule_chunked: chunk_size must be an int >= 1, got {chunk_size!r}")
    b, h, t, d_k = k.shape
    d_v, c = v.shape[-1], chunk_size
    pad = -t % c
    per_channel = log_decay.dim() == 4
    q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
    beta = F.pad(beta, (0, pad))
    log_decay = F.pad(log_decay, (0, 0, 0, pad) if per_channel else (0, pad))
    n = (t + pad) // c
    q, k, v = (x.reshape(b, h, n, c, -1) for x in (q, k, v))  # (B, H, N, C, d)
    beta = beta.reshape(b, h, n, c)
    G = log_decay.reshape(b, h, n, c, *log_decay.shape[3:]).cumsum(dim=3)  # log decay from the chunk's start
    decay = _channels(G.exp(), k)  # Γ_t, a factor on each key row
    # 1. within every chunk at once: the system and what does not depend on the state
    system, P = _within_chunks(q, k, G, beta)
    U0 = _solve(system, beta[..., None] * v)              # (B, H, N, C, d_v): the corrections from a zero state
    W = _solve(system, beta[..., None] * (decay * k))     # (B, H, N, C, d_k): how the state changes them
    queries_now = decay * q                                # Γ ⊙ Q: the queries read the state decayed to their time
    to_end = _channels((G[:, :, :, -1:] - G).exp(), k) * k  # e^{G_C − G_t} ⊙ k_t: what each key leaves at the end
    chunk_decay = _channels(G[:, :, :, -1].exp(), k[:, :, :, 0])  # Γ_C, (B, H, N, 1 or d_k)
    # 2. chunk after chunk, the memory carried
    memory = q.new_zeros(b, h, d_k, d_v) if state is None else state
    outputs = []
    for i in range(n):
        U = U0[:, :, i] - W[:, :, i] @ memory                        # this chunk's corrections u_t
        outputs.append(queries_now[:, :, i] @ memory + P[:, :, i] @ U)  # (Γ ⊙ Q) M₀ + P U
        memory = chunk_decay[:, :, i, :, None] * memory + to_end[:, :, i].transpose(-1, -2) @ U
    return torch.cat(outputs, dim=2)[:, :, :t], memory


def delta_rule_weights(q: Tensor, k: Tensor, log_decay: Tensor, beta: Tensor) -> Tensor:
    """The layer's implicit attention: ``W (B, H, T, T)`` with ``o = W v`` from a zero state, ``P (I + A)⁻¹
    Diag(β)`` over the whole sequence as one chunk (lower triangular; rows need not sum to 1, entries may be
    negative). Arguments as :func:`delta_rule_recurrent`'s."""
    _check(q, k, k, log_decay, beta, None, "delta_rule_weights")
    system, P = _within_chunks(q, k, log_decay.cumsum(dim=2), beta)
    return P @ _solve(system, torch.diag_embed(beta))
