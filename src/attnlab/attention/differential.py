"""Differential attention (Ye et al., 2024, "Differential Transformer", arXiv:2410.05258), as DiffLlama has it.

A softmax gives every key some weight, the irrelevant ones too: attention "noise". Differential attention computes
two softmax maps over the same keys and subtracts one from the other, so what both give the irrelevant keys cancels,
as a differential amplifier cancels the noise common to its two inputs. In DiffLlama (transformers'
``DiffLlamaAttention``) the heads come in pairs: of the ``H`` query heads, head ``p`` and head ``p + H/2``
(``p < H/2``) make pair ``p``, and with ``g = H / Hkv`` query heads per key/value head:

    A₁ = softmax(Q_p · K_jᵀ / √d)              key head j = p // g          (B, H/2, T, L)
    A₂ = softmax(Q_{p+H/2} · K_{j+Hkv/2}ᵀ / √d)  its twin in the second half  (B, H/2, T, L)
    D  = A₁ − λ · A₂                           the differential map          (B, H/2, T, L)
    V_p = [V_j | V_{j+Hkv/2}]                  the pair's value, 2d wide     (B, L, 2d)
    O_p = (1 − λ_init) · RMSNorm(D · V_p)       each pair normalised, no weight (B, T, 2d)

and the H/2 pair outputs, side by side (``H · d`` wide), go through ``out_proj`` as the heads of the one module do.
λ is learned through four vectors of the head's width, one λ for every pair of the layer (the paper's
re-parameterisation, which keeps λ's gradient on the scale of the other weights'):

    λ = exp(λ_q1 · λ_k1) − exp(λ_q2 · λ_k2) + λ_init,      λ_init = 0.8 − 0.6 · exp(−0.3 · depth)

with ``depth`` the layer's index from 0 (the paper's l − 1), so λ starts near 0.2 at the first layer and near 0.8
deep in the stack. The RMSNorm of each pair's output (the paper's GroupNorm, one group per head) keeps the pairs'
statistics apart, since their maps can be very differently sparse; ``(1 − λ_init)`` rescales it so the gradients
start where a Transformer's would.

The module is the one attention module (:class:`~attnlab.attention.MultiHeadAttention`: projections, RoPE, the
cache, the masks) with steps 3 and 4 replaced, in two forms proven equal (tests/attention/test_differential.py):

* the textbook (:meth:`DifferentialAttention.textbook`, ``backend="math"`` or with ``return_weights``): A₁, A₂ and
  D as matrices, then ``D · V``;
* the kernel's (:meth:`DifferentialAttention.two_maps_at_once`, every other backend): attention is linear in its
  weights, ``(A₁ − λA₂)·V = A₁·V − λ·A₂·V``, so one ordinary attention call of all ``H`` heads over the pairs'
  values ``V_p`` (2d wide) gives both products, and the pair's twin heads are subtracted after it. No score
  matrix is made; the fused kernels run.

``return_weights`` gives the differential map D, ``(B, H/2, T, L)``: one map per pair. Its rows sum to 1 − λ, not 1,
and its entries may be negative (that is the point: a key both maps favour gets little).

Example:
    >>> import torch
    >>> spec = DifferentialAttentionSpec(AttentionSpec(32, 32, num_heads=4, num_kv_heads=2, out_bias=False),
    ...                                  depth=0)
    >>> attn = spec.build()
    >>> out, d = attn(torch.randn(2, 5, 32), return_weights=True)
    >>> out.shape, d.shape                       # 4 heads make 2 pairs
    (torch.Size([2, 5, 32]), torch.Size([2, 2, 5, 5]))
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.attention.cache import LayerCache
from attnlab.attention.checks import as_batched, check_head_mask, unbatch
from attnlab.attention.multihead import MultiHeadAttention, RotaryLike
from attnlab.attention.spec import AttentionSpec
from attnlab.functional.masks import merge_masks
from attnlab.functional.math_attention import attention_scores, attention_weights


def lambda_init(depth: int) -> float:
    """λ_init = 0.8 − 0.6 · exp(−0.3 · depth), the paper's schedule over the layer's index from 0 (transformers'
    ``lambda_init_fn``)."""
    return 0.8 - 0.6 * math.exp(-0.3 * depth)


@dataclass(frozen=True)
class DifferentialAttentionSpec:
    """What a differential attention module is but its weights: the one module's spec for the projections, heads,
    window and backend, and what the difference adds.

    Attributes:
        attention: the :class:`~attnlab.attention.spec.AttentionSpec` of its projections, heads, cache and kernel;
            ``num_heads`` and ``num_kv_heads`` even (heads pair up, and so do key/value heads); no dropout (the paper
            defines none for the difference of two maps, and transformers refuses it), soft-cap, sinks or QK-norm.
        depth: the layer's index from 0, for ``λ_init``.
        eps: the ε of each pair's RMSNorm (the model's ``rms_norm_eps``).
        lambda_std: the standard deviation the four λ vectors start with (transformers' ``lambda_std_dev``).
    """

    attention: AttentionSpec
    depth: int
    eps: float = 1e-5
    lambda_std: float = 0.1

    def __post_init__(self) -> None:
        a = self.attention
        if not isinstance(a, AttentionSpec):
            raise TypeError(f"DifferentialAttentionSpec: attention must be an AttentionSpec, got {type(a).__name__}")
        owner = a.owner
        for name in ("num_heads", "num_kv_heads"):
            if getattr(a, name) % 2:
                raise ValueError(f"{owner}: differential attention pairs its heads (h with h + H/2), so {name} must "
                                 f"be even, got {name}={getattr(a, name)}")
        if a.dropout:
            raise ValueError(f"{owner}: differential attention has no dropout of its weights (the paper defines "
                             f"none for a difference of two maps), got dropout={a.dropout}")
        for name, off in (("softcap", None), ("sinks", False), ("qk_norm", None)):
            if getattr(a, name) != off:
                raise ValueError(f"{owner}: differential attention does not combine with {name}={getattr(a, name)!r}")
        if isinstance(self.depth, bool) or not isinstance(self.depth, int) or self.depth < 0:
            raise ValueError(f"{owner}: depth must be the layer's index, an int >= 0, got {self.depth!r}")
        for name in ("eps", "lambda_std"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"{owner}: {name} must be a finite number > 0, got {value!r}")

    @property
    def d_in(self) -> int:
        return self.attention.d_in

    @property
    def lambda_init(self) -> float:
        """λ_init at this depth."""
        return lambda_init(self.depth)

    def build(self, rotary: RotaryLike | None = None) -> DifferentialAttention:
        """The module (RoPE by ``rotary``, shared with the model's other layers)."""
        return DifferentialAttention(self, rotary)


class DifferentialAttention(MultiHeadAttention):
    """Differential attention: ``(B, T, d_in)`` -> ``(B, T, d_out)``; with ``return_weights`` also the differential
    map ``(B, H/2, T, L)``. Built from a :class:`DifferentialAttentionSpec` (``spec.build(rotary)``).

    Submodules and parameters: the one module's ``W_query``, ``W_key``, ``W_value``, ``out_proj`` (transformers'
    ``q_proj``, ``k_proj``, ``v_proj``, ``o_proj``) and the four λ vectors ``lambda_q1``, ``lambda_k1``,
    ``lambda_q2``, ``lambda_k2`` ``(head_dim,)``. Called as the one module is (self-attention, a cache, a padding
    mask, ``positions``, ``head_mask``); ``head_mask (H,)`` scales each head's map before the difference.
    """

    #: the kind of attention this is, not one softmax per head (``attnlab.inspect.capture`` says so by it)
    not_one_softmax: ClassVar[str] = "differential"

    def __init__(self, spec: DifferentialAttentionSpec, rotary: RotaryLike | None = None) -> None:
        nn.Module.__init__(self)
        if not isinstance(spec, DifferentialAttentionSpec):
            raise TypeError(f"DifferentialAttention: spec must be a DifferentialAttentionSpec, got "
                            f"{type(spec).__name__}")
        self.build(spec.attention, rotary)
        self.differential, self.lambda_init, self.eps = spec, spec.lambda_init, float(spec.eps)
        d = spec.attention.head_dim
        assert d is not None  # AttentionSpec.__post_init__ sets it
        self.lambda_q1, self.lambda_k1, self.lambda_q2, self.lambda_k2 = (
            nn.Parameter(torch.randn(d) * spec.lambda_std) for _ in range(4))

    def lambda_full(self, dtype: torch.dtype) -> Tensor:
        """λ = exp(λ_q1 · λ_k1) − exp(λ_q2 · λ_k2) + λ_init, a scalar: the dot products summed in float32, each
        exponential cast to ``dtype`` (as transformers computes it)."""
        one = torch.exp((self.lambda_q1 * self.lambda_k1).sum(dtype=torch.float32)).to(dtype)
        two = torch.exp((self.lambda_q2 * self.lambda_k2).sum(dtype=torch.float32)).to(dtype)
        return one - two + self.lambda_init

    def forward(self, x: Tensor, memory: Tensor | None = None, *, attention_mask: Tensor | None = None,
                attn_mask: Tensor | None = None, positions: Tensor | None = None, return_weights: bool = False,
                kv_cache: LayerCache | None = None, memory_kv: tuple[Tensor, Tensor] | None = None,
                head_mask: Tensor | None = None):
        """Self-attention of ``x`` (the arguments of :meth:`MultiHeadAttention.forward`; no memory)."""
        owner = type(self).__name__
        if memory is not None or memory_kv is not None:
            raise ValueError(f"{owner}: differential attention is self-attention; give no memory or memory_kv")
        x, unbatched = as_batched(x, self.d_in, owner)                             # (B, T, d_in)
        b, t, _ = x.shape
        # 1-2. the one module's projections, heads and RoPE; the cache's keys first, and what each query sees
        queries, keys, values = self.heads(x, None, None, positions, kv_cache)     # (B, H, T, d), (B, Hkv, Tk, d)
        mask = attn_mask if attention_mask is None else self.padding(attention_mask, attn_mask, keys, kv_cache)
        keys, values, mask, is_causal = self.visible(keys, values, mask, t, kv_cache)  # (B, Hkv, L, d)
        if head_mask is not None:
            check_head_mask(head_mask, (self.num_heads,), owner)
        # 3. the two maps of every pair, subtracted, times the pair's values
        if return_weights or self.backend == "math":
            pairs, weights = self.textbook(queries, keys, values, mask, is_causal, head_mask)
        else:
            pairs, weights = self.two_maps_at_once(queries, keys, values, mask, is_causal, head_mask), None
        # 4. each pair normalised (no weight) and rescaled, the pairs side by side, then mixed
        pairs = F.rms_norm(pairs.float(), (pairs.shape[-1],), eps=self.eps).to(pairs.dtype)  # (B, H/2, T, 2d)
        pairs = (1 - self.lambda_init) * pairs
        out = self.out_proj(pairs.transpose(1, 2).reshape(b, t, -1))             # (B, T, H/2 · 2d) -> (B, T, d_out)
        return unbatch(out, weights, unbatched, return_weights) if unbatched or return_weights else out

    @staticmethod
    def pair_values(values: Tensor) -> Tensor:
        """``values (B, Hkv, L, d)`` -> each pair's value ``[V_j | V_{j+Hkv/2}]``, ``(B, Hkv/2, L, 2d)``."""
        first, second = values.chunk(2, dim=1)
        return torch.cat((first, second), dim=-1)

    def textbook(self, queries: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None, is_causal: bool,
                 head_mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Step 3 as the paper writes it: the pairs' outputs ``D · V_p`` ``(B, H/2, T, 2d)`` and the differential
        maps ``D = A₁ − λ · A₂`` ``(B, H/2, T, L)``, every matrix explicit."""
        g, t, length = self.group_size, queries.shape[-2], keys.shape[-2]
        q1, q2 = queries.chunk(2, dim=1)                               # heads p and p + H/2: (B, H/2, T, d)
        k1, k2 = keys.chunk(2, dim=1)                                  # key heads j and j + Hkv/2: (B, Hkv/2, L, d)
        v = self.pair_values(values)                                   # (B, Hkv/2, L, 2d)
        # pair p reads key/value head p // g of each half: repeat each for the g pairs it serves
        k1, k2, v = (h.repeat_interleave(g, dim=1) for h in (k1, k2, v))  # (B, H/2, L, ·)
        allowed = merge_masks(mask, is_causal, t, length, queries.dtype, queries.device)
        scale = queries.shape[-1] ** -0.5 if self.scale is None else self.scale
        a1 = attention_weights(attention_scores(q1, k1, scale, allowed), allowed)   # (B, H/2, T, L)
        a2 = attention_weights(attention_scores(q2, k2, scale, allowed), allowed)
        if head_mask is not None:                                      # each head's map, before the difference
            m = head_mask.to(device=a1.device, dtype=a1.dtype)[:, None, None]
            a1, a2 = a1 * m[: len(m) // 2], a2 * m[len(m) // 2:]
        d = a1 - self.lambda_full(queries.dtype) * a2                  # the differential map
        return d @ v, d                                                # (B, H/2, T, 2d)

    def two_maps_at_once(self, queries: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None, is_causal: bool,
                         head_mask: Tensor | None = None) -> Tensor:
        """Step 3 by the kernel: ``A₁·V_p − λ·A₂·V_p`` from one attention call of all ``H`` heads over the pairs'
        values, ``(B, H/2, T, 2d)``. Key/value head j and j + Hkv/2 both carry ``V_{j mod Hkv/2}``, so every
        query head reads its pair's value wherever its key head is."""
        v = self.pair_values(values).repeat(1, 2, 1, 1)               # (B, Hkv, L, 2d)
        context, _ = self.attend(queries, keys, v, mask, is_causal, False)  # (B, H, T, 2d)
        if head_mask is not None:
            context = context * head_mask.to(device=context.device, dtype=context.dtype)[:, None, None]
        first, second = context.chunk(2, dim=1)                        # heads p and p + H/2: (B, H/2, T, 2d)
        return first - self.lambda_full(queries.dtype) * second

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, depth={self.differential.depth}, lambda_init={self.lambda_init:.4f}"
