"""Kimi Delta Attention (KDA; Kimi Team, 2025, "Kimi Linear", arXiv:2510.26692), the linear-attention layer of Kimi
Linear: Gated DeltaNet (:mod:`attnlab.attention.delta_net`) with a decay per key channel instead of one per head.

    x (B, T, D) ─ q_proj, k_proj, v_proj ─ short causal conv ─ SiLU ─ q, k, v   (H heads of d, q/k L2-normalised)
                ─ forget_gate ─ log α = −e^{A_log} · softplus(f_b(f_a(x)) + dt_bias)     (B, T, H, d): per channel
                ─ b_proj ─ β = σ(b)                                                      (B, T, H)
                                    └─ gated delta rule, S_t = S_{t−1} Diag(α_t)(I − β_t k_t k_tᵀ) + β_t v_t k_tᵀ ─ o
                ─ g_a_proj, g_b_proj ─ g ──────── w · RMSNorm(o) · σ(g) ─ o_proj ─ (B, T, D)

What differs from Gated DeltaNet, and why:

* **The decay per channel.** ``Diag(α_t)`` lets each key feature forget at its own rate (Gated DeltaNet's ``α_t I``
  forgets all of a head's memory at once): some features hold a fact for thousands of tokens while others turn
  over every few. The chunked rule then keeps the factor inside its sums over channels (``C × C × d`` products
  instead of ``C × C``), the same algebra (:func:`~attnlab.attention.delta_rule.delta_rule_chunked`).
* **Low-rank gates.** The decay's input and the output gate each go through a bottleneck of width ``head_dim``
  (``f_a_proj`` then ``f_b_proj``; ``g_a_proj`` then ``g_b_proj``): ``2 · D · d`` weights where a full map would take
  ``D · H · d``.
* **A sigmoid output gate** (``σ(g)``, not ``SiLU(z)``), and as many value heads as key heads, all of width d.

Kimi Linear puts three of these before every MLA layer, and its MLA layers carry no RoPE: the KDA layers' order
(the recurrence) is the only position the model has. The cache, the padding rule and ``return_weights`` are those of
:class:`~attnlab.attention.delta_net.GatedDeltaNet` (its docstring): the convolution's last inputs and a float32
memory ``(H, d, d)`` per row, a padded token's input zeroed, the implicit attention ``(B, H, T, T)`` or None with a
cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.arguments import check_positive_int
from attnlab.attention.delta_net import (
    GatedRMSNorm,
    LinearAttentionSpec,
    RecurrentCache,
    finished,
    read_and_write,
    real_inputs,
    short_convolution,
)


@dataclass(frozen=True)
class KimiDeltaAttentionSpec(LinearAttentionSpec):
    """One KDA layer, all but its weights.

    Attributes:
        d_model: the width in and out.
        num_heads: heads H, each with its own memory (Kimi-Linear-48B: 32).
        head_dim: d, the width of a query, key and value head (128), and of the gates' bottlenecks.
        conv_kernel: taps of the short convolution (4).
        eps: the output norm's ε.
        chunk_size: tokens per chunk of the delta rule (64); None: token by token (the same numbers).
        owner: the name errors begin with; not compared.
    """

    d_model: int
    num_heads: int
    head_dim: int
    conv_kernel: int = 4
    eps: float = 1e-6
    chunk_size: int | None = 64
    owner: str = field(default="KimiDeltaAttentionSpec", compare=False, repr=False)

    def __post_init__(self) -> None:
        for name in ("d_model", "num_heads", "head_dim", "conv_kernel"):
            check_positive_int(self.owner, name, getattr(self, name))
        self.check_eps_and_chunks()

    @property
    def conv_channels(self) -> int:
        """Channels of the short convolution: q, k and v side by side, ``3 · H · d``."""
        return 3 * self.num_heads * self.head_dim

    @property
    def memory_shape(self) -> tuple[int, int, int]:
        """One memory per head, ``d × d``."""
        return self.num_heads, self.head_dim, self.head_dim

    def build(self, rotary: object = None) -> KimiDeltaAttention:
        """The layer (``rotary`` is ignored: no positions enter it)."""
        return KimiDeltaAttention(self)


class ForgetGate(nn.Module):
    """The per-channel decay: ``x (B, T, D)`` -> ``log α (B, T, H, d)``, ``−e^{A_log_h} · softplus(f_b(f_a(x)) +
    dt_bias)``, always < 0, in float32. ``A_log`` ``(1, 1, H, 1)``: one rate per head, scaling its channels' own."""

    def __init__(self, spec: KimiDeltaAttentionSpec) -> None:
        super().__init__()
        width = spec.num_heads * spec.head_dim
        self.num_heads, self.head_dim = spec.num_heads, spec.head_dim
        self.f_a_proj = nn.Linear(spec.d_model, spec.head_dim, bias=False)  # the bottleneck
        self.f_b_proj = nn.Linear(spec.head_dim, width, bias=False)
        self.dt_bias = nn.Parameter(torch.zeros(width))
        self.A_log = nn.Parameter(torch.empty(1, 1, spec.num_heads, 1).uniform_(1, 16).log())

    def forward(self, x: Tensor) -> Tensor:
        f = self.f_b_proj(self.f_a_proj(x)).float() + self.dt_bias.float()
        f = f.view(*x.shape[:2], self.num_heads, self.head_dim)
        return -self.A_log.float().exp() * F.softplus(f)


class KimiDeltaAttention(nn.Module):
    """The KDA layer: ``(B, T, d_model)`` -> ``(B, T, d_model)``, called as the one attention module is.

    ``KimiDeltaAttention(spec)``. Submodules and parameters, transformers' Kimi Linear names: ``q_proj``, ``k_proj``,
    ``v_proj``, ``conv1d`` (depthwise, over q, k and v side by side), ``forget_gate`` (:class:`ForgetGate`),
    ``b_proj`` (β), ``g_a_proj`` and ``g_b_proj`` (the output gate), ``o_norm`` (gated RMSNorm, sigmoid), ``o_proj``.
    ``forward``'s arguments and results: :class:`~attnlab.attention.delta_net.GatedDeltaNet`'s.

    Example:
        >>> layer = KimiDeltaAttentionSpec(32, num_heads=2, head_dim=8).build()
        >>> layer(torch.randn(2, 5, 32)).shape
        torch.Size([2, 5, 32])
    """

    #: the kind of attention this is, not one softmax per head (``attnlab.inspect.capture`` says so by it)
    not_one_softmax: ClassVar[str] = "kimi delta"

    def __init__(self, spec: KimiDeltaAttentionSpec) -> None:
        super().__init__()
        if not isinstance(spec, KimiDeltaAttentionSpec):
            raise TypeError(f"KimiDeltaAttention: spec must be a KimiDeltaAttentionSpec, got {type(spec).__name__}")
        self.spec = s = spec
        self.width = width = s.num_heads * s.head_dim
        self.q_proj, self.k_proj, self.v_proj = (nn.Linear(s.d_model, width, bias=False) for _ in range(3))
        self.conv1d = nn.Conv1d(s.conv_channels, s.conv_channels, s.conv_kernel, groups=s.conv_channels, bias=False)
        self.forget_gate = ForgetGate(s)
        self.b_proj = nn.Linear(s.d_model, s.num_heads, bias=False)
        self.g_a_proj = nn.Linear(s.d_model, s.head_dim, bias=False)
        self.g_b_proj = nn.Linear(s.head_dim, width, bias=False)
        self.o_norm = GatedRMSNorm(s.head_dim, s.eps, "sigmoid")
        self.o_proj = nn.Linear(width, s.d_model, bias=False)

    def forward(self, x: Tensor, *, attention_mask: Tensor | None = None, attn_mask: Tensor | None = None,
                positions: Tensor | None = None, return_weights: bool = False, kv_cache: RecurrentCache | None = None,
                head_mask: Tensor | None = None):
        """Arguments and shapes: the class docstring."""
        s = self.spec
        x, unbatched = real_inputs(x, attention_mask, attn_mask, s.d_model, type(self).__name__)
        b, t, _ = x.shape
        # 1. q, k, v through the short convolution; the decay per channel and the step per head
        qkv = torch.cat([self.q_proj(x), self.k_proj(x), self.v_proj(x)], dim=-1)
        qkv, conv = short_convolution(qkv, self.conv1d, None if kv_cache is None else kv_cache.conv)
        q, k, v = (y.view(b, t, s.num_heads, s.head_dim).transpose(1, 2) for y in qkv.split(self.width, dim=-1))
        log_decay = self.forget_gate(x).transpose(1, 2)                            # (B, H, T, d), log α < 0
        beta = torch.sigmoid(self.b_proj(x)).transpose(1, 2)                      # (B, H, T)
        # 2. the gated delta rule with Diag(α_t), from the cached memory
        out = read_and_write(q, k, v, log_decay, beta, conv, kv_cache, head_mask, s, x.dtype)  # (B, T, H, d)
        # 3. w · RMSNorm(o) · σ(g), per head; then back to d_model
        gate = self.g_b_proj(self.g_a_proj(x)).view(b, t, s.num_heads, s.head_dim)
        out = self.o_proj(self.o_norm(out, gate).reshape(b, t, self.width))
        return finished(out, unbatched, return_weights, q, k, log_decay, beta, kv_cache)

    def extra_repr(self) -> str:
        s = self.spec
        return (f"d_model={s.d_model}, num_heads={s.num_heads}, head_dim={s.head_dim}, conv_kernel={s.conv_kernel}, "
                f"chunk_size={s.chunk_size}")


__all__ = ["ForgetGate", "KimiDeltaAttention", "KimiDeltaAttentionSpec"]
