"""Gated DeltaNet (Yang, Kautz & Hatamizadeh, 2024, arXiv:2412.06464), the linear-attention layer of Qwen3-Next and
Qwen3.5: three of every four of their layers.

    x (B, T, D) ─ in_proj_qkv ─ short causal conv ─ SiLU ─ q, k, v ─┐
                                                  q, k: L2-normalised, q · 1/√d_k
                ─ in_proj_a ─ α = exp(−e^{A_log} · softplus(a + dt_bias))   (decay, one per value head)
                ─ in_proj_b ─ β = σ(b)                                       (step size, one per value head)
                                                     └─ gated delta rule (:mod:`attnlab.attention.delta_rule`) ─ o
                ─ in_proj_z ─ z ──────────── w · RMSNorm(o) · SiLU(z) ─ out_proj ─ (B, T, D)

Each piece, and why it is there:

* **The short convolution.** Each channel of q, k and v is mixed with its own previous ``conv_kernel − 1`` inputs
  (a depthwise causal convolution, 4 taps in Qwen3-Next): a cheap local view that the memory alone lacks. It is the
  only place the layer sees neighbours directly; positions enter nowhere else (no RoPE), the order is in the
  recurrence itself.
* **Unit queries and keys.** ``k kᵀ`` is then a projection, so ``(I − β k kᵀ)`` with ``β ≤ 1`` never amplifies the
  memory; the query is scaled by 1/√d_k as a softmax query would be.
* **The decay α and the step β**, computed from the token itself: α as a discretised continuous-time decay (Mamba 2's
  ``A`` and ``dt``: ``log α = −e^{A_log} · softplus(a + dt_bias)``, always < 0), β by a sigmoid.
* **Grouped value heads.** ``num_value_heads`` memories, each read and written by the key head
  ``h // (num_value_heads / num_key_heads)`` (Qwen3-Next: 32 value heads over 16 key heads), as GQA shares keys.
* **The gated output norm** ``w · RMSNorm(o) · SiLU(z)``, per value head: the memory's read-out has no fixed scale,
  so it is normalised, then gated by a projection of the input.

What the layer keeps for decoding (:class:`RecurrentCache`): the last ``conv_kernel − 1`` inputs of the
convolution and the memory ``(num_value_heads, d_k, d_v)`` per row, in float32 (as transformers keeps it, even in a
bfloat16 model): the same bytes at any length, where a softmax layer's keys and values grow by a row per token.

A linear-attention layer has no softmax weights. ``return_weights=True`` gives the nearest honest thing, its
implicit attention ``W (B, num_value_heads, T, T)`` with ``o = W v`` (:func:`~attnlab.attention.delta_rule.
delta_rule_weights`): lower triangular, rows that need not sum to 1, negative entries where the delta rule erased
what an earlier token wrote. It exists only for a whole sequence from a zero state: with a cache the earlier values
are gone (only the memory is kept), and it is None.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import ClassVar, Protocol

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.arguments import check_positive_int
from attnlab.attention.checks import as_batched, key_padding, mask_heads
from attnlab.attention.delta_rule import delta_rule_chunked, delta_rule_recurrent, delta_rule_weights, l2_normalise


class RecurrentCache(Protocol):
    """What a linear-attention layer keeps between decoding steps, one layer's share
    (:class:`~attnlab.models.caches.RecurrentLayerCache` is one).

    ``conv``: the last ``conv_kernel − 1`` inputs of the short convolution ``(B, channels, conv_kernel − 1)`` (None
    before the first token: zeros); ``state``: the memory ``(B, H, d_k, d_v)`` in float32 (None: zeros); ``length``:
    the tokens it has seen."""

    conv: Tensor | None
    state: Tensor | None
    length: int

    def keep(self, conv: Tensor, state: Tensor, t: int) -> None:
        """Hold the convolution's last inputs and the memory after ``t`` more tokens."""
        ...


def token_padding(attention_mask: Tensor | None, attn_mask: Tensor | None, x: Tensor, owner: str) -> Tensor | None:
    """Which of the ``T`` tokens of ``x (B, T, D)`` are real, ``(B, T)`` bool, or None (all): from a caller's ``(B, T)``
    ``attention_mask`` or a model's key padding ``attn_mask (B, 1, 1, L)`` (the last T of its L keys are these
    tokens). A layer that keeps a memory reads nothing else of a mask: it is causal by construction."""
    if attention_mask is not None:
        if attn_mask is not None:
            raise ValueError(f"{owner}: give attention_mask (B, T) or attn_mask (B, 1, 1, L), not both")
        padding = key_padding(attention_mask, x, owner)  # (B, 1, 1, T)
        return None if padding is None else padding[:, 0, 0]
    if attn_mask is None:
        return None
    b, t = x.shape[:2]
    if attn_mask.dtype != torch.bool or attn_mask.dim() != 4 or attn_mask.shape[1:3] != (1, 1) \
            or attn_mask.shape[0] not in (1, b) or attn_mask.shape[3] < t:
        raise ValueError(f"{owner}: attn_mask must be a bool key padding mask (B, 1, 1, L) with L >= T = {t}, as a "
                         f"model passes it (a linear-attention layer reads only which tokens are padding), got "
                         f"{attn_mask.dtype} {tuple(attn_mask.shape)}")
    return attn_mask[:, 0, 0, attn_mask.shape[3] - t:]


def short_convolution(x: Tensor, conv: nn.Conv1d, previous: Tensor | None) -> tuple[Tensor, Tensor]:
    """The causal depthwise convolution and its SiLU: ``x (B, T, C)`` -> ``(B, T, C)``, and the last ``K − 1`` inputs
    ``(B, C, K − 1)`` for the next call. ``previous``: those of the call before (None: zeros, the sequence's start);
    with them in front, the output at t reads inputs ``t − K + 1 .. t`` whether the sequence came at once or in
    pieces."""
    x = x.transpose(1, 2)                                        # (B, C, T): channels first, as conv1d takes them
    b, c, _ = x.shape
    k = conv.kernel_size[0]
    previous = x.new_zeros(b, c, k - 1) if previous is None else previous.to(x.dtype)
    window = torch.cat([previous, x], dim=-1)                    # (B, C, K − 1 + T)
    out = F.conv1d(window, conv.weight, conv.bias, groups=c)     # each channel its own K taps: (B, C, T)
    return F.silu(out).transpose(1, 2), window[..., window.shape[-1] - (k - 1):]


def gated_delta_rule(q: Tensor, k: Tensor, v: Tensor, log_decay: Tensor, beta: Tensor, state: Tensor | None,
                     chunk_size: int | None) -> tuple[Tensor, Tensor]:
    """The memory read and written, in float32: ``q, k (B, H, T, d_k)`` normalised to unit length (q then scaled
    by 1/√d_k), the rule in chunks of ``chunk_size`` (one token, or ``chunk_size=None``: the recurrence).
    Returns ``o (B, H, T, d_v)`` float32 and the memory after the last token."""
    q = l2_normalise(q.float()) * q.shape[-1] ** -0.5
    k = l2_normalise(k.float())
    rule = delta_rule_recurrent if chunk_size is None or q.shape[2] == 1 else \
        partial(delta_rule_chunked, chunk_size=chunk_size)
    return rule(q, k, v.float(), log_decay.float(), beta.float(), state)


def real_inputs(x: Tensor, attention_mask: Tensor | None, attn_mask: Tensor | None, d_model: int,
                owner: str) -> tuple[Tensor, bool]:
    """``x`` batched ``(B, T, d_model)`` with each padded token's input zeroed (transformers' rule: it then writes
    nothing, and left padding leaves the convolution and the memory at zero until the first real token), and
    whether it came unbatched."""
    x, unbatched = as_batched(x, d_model, owner)
    real = token_padding(attention_mask, attn_mask, x, owner)
    return (x if real is None else x * real[..., None].to(x.dtype)), unbatched


def read_and_write(q: Tensor, k: Tensor, v: Tensor, log_decay: Tensor, beta: Tensor, conv: Tensor,
                   kv_cache: RecurrentCache | None, head_mask: Tensor | None, spec: LinearAttentionSpec,
                   dtype: torch.dtype) -> Tensor:
    """The memory read and written (in chunks of ``spec.chunk_size``) from the cached one (zeros at the start), the
    cache then holding the new memory and the convolution's last inputs ``conv``: the outputs ``(B, T, H, d_v)``
    in ``dtype``, ``head_mask (H,)`` applied."""
    out, state = gated_delta_rule(q, k, v, log_decay, beta, None if kv_cache is None else kv_cache.state,
                                  spec.chunk_size)
    if kv_cache is not None:
        kv_cache.keep(conv, state, q.shape[2])
    return mask_heads(out.to(dtype), head_mask, spec.owner).transpose(1, 2)


def finished(out: Tensor, unbatched: bool, return_weights: bool, q: Tensor, k: Tensor, log_decay: Tensor,
             beta: Tensor, kv_cache: RecurrentCache | None):
    """``out`` as the caller gave ``x`` (unbatched or not), with the implicit attention if asked for: ``W (B, H, T,
    T)`` with ``o = W v`` from a zero state, None with a cache (the layer's stand-in for attention weights)."""
    out = out[0] if unbatched else out
    if not return_weights:
        return out
    if kv_cache is not None:
        return out, None
    q = l2_normalise(q.float()) * q.shape[-1] ** -0.5
    weights = delta_rule_weights(q, l2_normalise(k.float()), log_decay.float(), beta.float())
    return out, weights[0] if unbatched else weights


class GatedRMSNorm(nn.Module):
    """``w · x / √(mean(x²) + ε) · act(gate)`` over the last dim ``d``: ``(..., d)``, ``(..., d)`` -> ``(..., d)``.

    The statistics in float32, the normalised vector cast back and multiplied by ``w`` (Llama's order), the gate's
    activation in float32 (Qwen3-Next's norm; Kimi's multiplies ``w`` in float32, the same number in a float32
    model). ``activation``: ``"silu"`` (Gated DeltaNet) or ``"sigmoid"`` (KDA).
    """

    ACTIVATIONS: ClassVar[dict[str, Callable[[Tensor], Tensor]]] = {"silu": F.silu, "sigmoid": torch.sigmoid}

    def __init__(self, d: int, eps: float = 1e-6, activation: str = "silu") -> None:
        super().__init__()
        if activation not in self.ACTIVATIONS:
            raise ValueError(f"GatedRMSNorm: activation must be one of {tuple(self.ACTIVATIONS)}, got {activation!r}")
        self.eps, self.activation = eps, activation
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: Tensor, gate: Tensor) -> Tensor:
        x32 = x.float()
        normed = (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)
        return (self.weight * normed * self.ACTIVATIONS[self.activation](gate.float())).to(x.dtype)

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}, activation={self.activation}"


class LinearAttentionSpec:
    """What the specs of the linear-attention layers share (Gated DeltaNet's here, KDA's in
    :mod:`attnlab.attention.kimi_delta`): the checks of ε and the chunk size, what a block reads (``d_in``, no
    QK-norm) and the shape of the state a cache keeps. A subclass gives ``conv_channels`` and ``memory_shape``."""

    d_model: int
    conv_kernel: int
    eps: float
    chunk_size: int | None
    owner: str

    def check_eps_and_chunks(self) -> None:
        if isinstance(self.eps, bool) or not isinstance(self.eps, int | float) or not self.eps > 0:
            raise ValueError(f"{self.owner}: eps must be a number > 0, got {self.eps!r}")
        if self.chunk_size is not None:
            check_positive_int(self.owner, "chunk_size (tokens per chunk of the delta rule; None: one at a time)",
                               self.chunk_size)

    @property
    def d_in(self) -> int:
        """The input width (a block reads its ``d_model`` from here, as from an ``AttentionSpec``)."""
        return self.d_model

    @property
    def conv_channels(self) -> int:
        """Channels of the short convolution: q, k and v side by side."""
        raise NotImplementedError

    @property
    def memory_shape(self) -> tuple[int, int, int]:
        """``(heads, d_k, d_v)`` of the memory one row keeps."""
        raise NotImplementedError


@dataclass(frozen=True)
class GatedDeltaNetSpec(LinearAttentionSpec):
    """One Gated DeltaNet layer, all but its weights.

    Attributes:
        d_model: the width in and out.
        num_key_heads: query/key heads (Qwen3-Next: 16).
        num_value_heads: value heads, each with its own memory; a multiple of ``num_key_heads`` (Qwen3-Next: 32).
        key_head_dim: d_k, the width of a query/key head (128).
        value_head_dim: d_v, the width of a value head (128).
        conv_kernel: taps of the short convolution (4).
        eps: the output norm's ε.
        chunk_size: tokens per chunk of the delta rule in a call of several tokens (transformers': 64); None: the
            recurrence, token by token (the same numbers, slower).
        owner: the name errors begin with; not compared.
    """

    d_model: int
    num_key_heads: int
    num_value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int = 4
    eps: float = 1e-6
    chunk_size: int | None = 64
    owner: str = field(default="GatedDeltaNetSpec", compare=False, repr=False)

    def __post_init__(self) -> None:
        for name in ("d_model", "num_key_heads", "num_value_heads", "key_head_dim", "value_head_dim", "conv_kernel"):
            check_positive_int(self.owner, name, getattr(self, name))
        if self.num_value_heads % self.num_key_heads:
            raise ValueError(f"{self.owner}: num_value_heads must be a multiple of num_key_heads (each key head "
                             f"serves a whole group of value heads), got num_value_heads={self.num_value_heads}, "
                             f"num_key_heads={self.num_key_heads}")
        self.check_eps_and_chunks()

    @property
    def conv_channels(self) -> int:
        """Channels of the short convolution: q, k and v side by side."""
        return 2 * self.num_key_heads * self.key_head_dim + self.num_value_heads * self.value_head_dim

    @property
    def memory_shape(self) -> tuple[int, int, int]:
        """One memory per value head, ``d_k × d_v``."""
        return self.num_value_heads, self.key_head_dim, self.value_head_dim

    def build(self, rotary: object = None) -> GatedDeltaNet:
        """The layer (``rotary`` is ignored: no positions enter it)."""
        return GatedDeltaNet(self)


class GatedDeltaNet(nn.Module):
    """The Gated DeltaNet layer: ``(B, T, d_model)`` -> ``(B, T, d_model)``, called as the one attention module is.

    ``GatedDeltaNet(spec)``. Submodules and parameters, transformers' Qwen3.5 names: ``in_proj_qkv`` (to q, k and v,
    side by side), ``conv1d`` (the short convolution, depthwise), ``in_proj_z`` (the output gate), ``in_proj_b``
    (β), ``in_proj_a`` (α, with ``A_log`` and ``dt_bias``, one per value head), ``norm`` (the gated RMSNorm, per
    value head), ``out_proj``.

    ``forward(x, *, attention_mask=None, attn_mask=None, positions=None, return_weights=False, kv_cache=None,
    head_mask=None)``: ``attention_mask (B, T)`` (1 = real token) or a model's key padding ``attn_mask (B, 1, 1, L)``:
    a padded token's input is zeroed (transformers' rule), so left padding leaves the memory and the convolution at
    zero until the first real token and the row computes what it computes alone; ``positions`` is ignored;
    ``kv_cache`` a :class:`RecurrentCache`; ``head_mask (num_value_heads,)``. With ``return_weights``: also the
    implicit attention ``(B, num_value_heads, T, T)``, or None with a cache (the module docstring).

    Example:
        >>> layer = GatedDeltaNetSpec(32, num_key_heads=2, num_value_heads=4, key_head_dim=8, value_head_dim=8).build()
        >>> layer(torch.randn(2, 5, 32)).shape
        torch.Size([2, 5, 32])
    """

    #: the kind of attention this is, not one softmax per head (``attnlab.inspect.capture`` says so by it)
    not_one_softmax: ClassVar[str] = "gated delta rule"

    def __init__(self, spec: GatedDeltaNetSpec) -> None:
        super().__init__()
        if not isinstance(spec, GatedDeltaNetSpec):
            raise TypeError(f"GatedDeltaNet: spec must be a GatedDeltaNetSpec, got {type(spec).__name__}")
        self.spec = s = spec
        self.key_width, self.value_width = s.num_key_heads * s.key_head_dim, s.num_value_heads * s.value_head_dim
        self.in_proj_qkv = nn.Linear(s.d_model, s.conv_channels, bias=False)
        self.conv1d = nn.Conv1d(s.conv_channels, s.conv_channels, s.conv_kernel, groups=s.conv_channels, bias=False)
        self.in_proj_z = nn.Linear(s.d_model, self.value_width, bias=False)
        self.in_proj_b = nn.Linear(s.d_model, s.num_value_heads, bias=False)
        self.in_proj_a = nn.Linear(s.d_model, s.num_value_heads, bias=False)
        # log α = −e^{A_log} · softplus(a + dt_bias): transformers' start, A ~ U(0.01, 16) and dt_bias = 1
        self.A_log = nn.Parameter(torch.empty(s.num_value_heads).uniform_(0.01, 16).log())
        self.dt_bias = nn.Parameter(torch.ones(s.num_value_heads))
        self.norm = GatedRMSNorm(s.value_head_dim, s.eps, "silu")
        self.out_proj = nn.Linear(self.value_width, s.d_model, bias=False)

    def forward(self, x: Tensor, *, attention_mask: Tensor | None = None, attn_mask: Tensor | None = None,
                positions: Tensor | None = None, return_weights: bool = False, kv_cache: RecurrentCache | None = None,
                head_mask: Tensor | None = None):
        """Arguments and shapes: the class docstring."""
        s = self.spec
        x, unbatched = real_inputs(x, attention_mask, attn_mask, s.d_model, type(self).__name__)
        b, t, _ = x.shape
        # 1. q, k, v through the short convolution; the gate z; β and α from the token itself
        qkv, conv = short_convolution(self.in_proj_qkv(x), self.conv1d, None if kv_cache is None else kv_cache.conv)
        q, k, v = qkv.split((self.key_width, self.key_width, self.value_width), dim=-1)
        group = s.num_value_heads // s.num_key_heads  # value head h reads key head h // group
        q, k = (y.view(b, t, s.num_key_heads, s.key_head_dim).transpose(1, 2).repeat_interleave(group, dim=1)
                for y in (q, k))                                                   # (B, Hv, T, d_k)
        v = v.view(b, t, s.num_value_heads, s.value_head_dim).transpose(1, 2)      # (B, Hv, T, d_v)
        beta = torch.sigmoid(self.in_proj_b(x)).transpose(1, 2)                  # (B, Hv, T), in (0, 1)
        log_decay = -self.A_log.float().exp() * F.softplus(self.in_proj_a(x).float() + self.dt_bias.float())
        log_decay = log_decay.transpose(1, 2)                                      # (B, Hv, T), log α < 0
        # 2. the gated delta rule, from the cached memory (zeros at the start)
        out = read_and_write(q, k, v, log_decay, beta, conv, kv_cache, head_mask, s, x.dtype)  # (B, T, Hv, d_v)
        # 3. w · RMSNorm(o) · SiLU(z), per value head; then back to d_model
        z = self.in_proj_z(x).view(b, t, s.num_value_heads, s.value_head_dim)
        out = self.out_proj(self.norm(out, z).reshape(b, t, self.value_width))
        return finished(out, unbatched, return_weights, q, k, log_decay, beta, kv_cache)

    def extra_repr(self) -> str:
        s = self.spec
        return (f"d_model={s.d_model}, num_key_heads={s.num_key_heads}, num_value_heads={s.num_value_heads}, "
                f"key_head_dim={s.key_head_dim}, value_head_dim={s.value_head_dim}, conv_kernel={s.conv_kernel}, "
                f"chunk_size={s.chunk_size}")


__all__ = [
    "GatedDeltaNet",
    "GatedDeltaNetSpec",
    "GatedRMSNorm",
    "LinearAttentionSpec",
    "RecurrentCache",
    "finished",
    "gated_delta_rule",
    "read_and_write",
    "real_inputs",
    "short_convolution",
    "token_padding",
]
