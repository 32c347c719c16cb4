"""Rotary position embedding, RoPE (Su et al., 2021, "RoFormer", arXiv:2104.09864), as Llama, Qwen and Mistral use it.

Instead of adding a position vector to the tokens, RoPE *rotates* each query and key by an angle proportional to
its position m: feature pair ``(x_i, x_{i + D/2})`` turns by ``m · θ_i`` with ``θ_i = base^(-2i/D)``, i < D/2.

    rope(x, m)_i        = x_i · cos(m θ_i) − x_{i+D/2} · sin(m θ_i)
    rope(x, m)_{i+D/2}  = x_{i+D/2} · cos(m θ_i) + x_i · sin(m θ_i)

A rotation keeps lengths, and two rotations compose, so ``rope(q, m) · rope(k, n)`` depends on m − n only: the
scores see *relative* positions although each vector was turned by its absolute one. The pairs are ``(i, i + D/2)``
("rotate half", the layout of Llama's checkpoints in transformers), not the paper's neighbours ``(2i, 2i + 1)``;
the two differ only by a fixed permutation of the features.

Scalings stretch a model trained on ``context_length`` positions to longer inputs (:class:`RopeScaling`):

* ``linear`` (position interpolation; kaiokendev, 2023, and Chen et al., arXiv:2306.15595): positions divided
  by ``factor``. Applied to the frequencies, ``θ_i / factor``, which is the same product ``m · θ_i / factor``.
* ``dynamic`` (dynamic NTK-aware scaling; bloc97 and emozilla, r/LocalLLaMA, 2023; see YaRN, Peng et al.,
  arXiv:2309.00071, §3.1 and §3.3): NTK-aware scaling raises the base, ``base' = base · s^(D / (D − 2))``, which
  slows the low frequencies by about ``s`` and leaves the highest nearly untouched. The dynamic variant picks s
  from the length L actually seen, L = max(positions) + 1, exactly as transformers' ``"dynamic"`` rope type does:
  ``s = factor · max(L, context_length) / context_length − (factor − 1)``, so s = 1 (plain RoPE) up to
  ``context_length`` and grows linearly beyond it. Keys already in a KV cache keep the angles they were rotated
  with, as in transformers' cached generation (docs/modern.md, "Past the context window"). The stretched base is
  computed in float32, as transformers computes it when the length grows, so the two agree to the last bit.
* ``yarn`` (Peng et al., arXiv:2309.00071; :mod:`attnlab.layers.yarn`): fast pairs kept, slow ones divided by
  ``factor``, a ramp between, and cos and sin multiplied by an attention factor (``0.1 · ln(factor) + 1``).
* ``llama3`` (Meta's Llama 3.1 / 3.2 checkpoints; ``apply_scaling`` in meta-llama/llama-models): with wavelength
  λ_i = 2π / θ_i and L₀ = ``original_context_length``, frequencies whose wavelength is shorter than
  L₀ / ``high_freq_factor`` stay, those longer than L₀ / ``low_freq_factor`` are divided by ``factor``, and those
  between blend the two: ``θ'_i = (1 − t) · θ_i / factor + t · θ_i``, ``t = (L₀ / λ_i − low) / (high − low)``.
* ``longrope`` (Phi-3's long-context checkpoints): a searched factor per frequency, short or long by the length
  seen, and cos and sin times an attention factor (:mod:`attnlab.layers.longrope`).

The angles are computed in float32 (``positions.float() · θ``) and only cos/sin are cast to the input's dtype at
the end: the arithmetic transformers uses for these checkpoints, so the two agree to float32 rounding; bf16
angles would be off by whole radians at positions in the thousands.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import Tensor

from attnlab.arguments import check_positive_int
from attnlab.layers.longrope import longrope_attention_factor, longrope_inv_freq
from attnlab.layers.yarn import yarn_attention_factor, yarn_inv_freq

SCALING_TYPES = ("linear", "dynamic", "yarn", "llama3", "longrope")
# transformers' names for two of the fields, so that a checkpoint's ``rope_scaling`` dict can be passed as it is
_HF_ALIASES = {"rope_type": "type", "original_max_position_embeddings": "original_context_length"}


def _positive_float(owner: str, name: str, x: Any) -> None:
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x) or x <= 0:
        raise ValueError(f"{owner}: {name} must be a finite number > 0, got {x!r}")


@dataclass(frozen=True)
class RopeScaling:
    """How to stretch RoPE beyond the trained length (see the module docstring for each formula).

    Args:
        type: ``"linear"``, ``"dynamic"``, ``"yarn"`` or ``"llama3"``.
        factor: how many times longer the context becomes (Llama 3.1: 8).
        low_freq_factor, high_freq_factor: ``llama3`` only (Llama 3.1: 1 and 4).
        original_context_length: ``llama3``, ``yarn`` and ``longrope``, the length the model was first trained on
            (Llama 3.1: 8192; Phi-3: 4096).
        short_factor, long_factor: ``longrope`` only, one stretch per frequency (head_dim / 2 each).
        attention_factor: ``yarn`` and ``longrope``, cos and sin's factor (None: each one's default).
        beta_fast, beta_slow, mscale, mscale_all_dim, truncate: ``yarn`` only (transformers' names and defaults;
            :mod:`attnlab.layers.yarn`).
    """

    type: str
    factor: float
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_context_length: int = 8192
    short_factor: tuple[float, ...] | None = None
    long_factor: tuple[float, ...] | None = None
    attention_factor: float | None = None
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    mscale: float | None = None
    mscale_all_dim: float | None = None
    truncate: bool = True

    def __post_init__(self) -> None:
        if self.type not in SCALING_TYPES:
            raise ValueError(
                f"RopeScaling: type must be one of {', '.join(map(repr, SCALING_TYPES))}, got {self.type!r}"
            )
        _positive_float("RopeScaling", "factor", self.factor)
        _positive_float("RopeScaling", "low_freq_factor", self.low_freq_factor)
        _positive_float("RopeScaling", "high_freq_factor", self.high_freq_factor)
        check_positive_int("RopeScaling", "original_context_length", self.original_context_length)
        _positive_float("RopeScaling", "beta_fast", self.beta_fast)
        _positive_float("RopeScaling", "beta_slow", self.beta_slow)
        if self.attention_factor is not None:
            _positive_float("RopeScaling", "attention_factor", self.attention_factor)
        if self.type == "llama3" and not self.high_freq_factor > self.low_freq_factor:
            raise ValueError(
                "RopeScaling: llama3 needs high_freq_factor > low_freq_factor (the blend divides by their "
                f"difference), got high_freq_factor={self.high_freq_factor!r}, low_freq_factor={self.low_freq_factor!r}"
            )
        if self.type == "longrope" and (self.short_factor is None or self.long_factor is None):
            raise ValueError("RopeScaling: longrope needs short_factor and long_factor (one number per frequency)")
        for name in ("short_factor", "long_factor"):  # lists in a config.json; tuples keep the config hashable
            if getattr(self, name) is not None:
                object.__setattr__(self, name, tuple(float(x) for x in getattr(self, name)))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RopeScaling:
        """Build from a dict with these field names or transformers' (``rope_type``,
        ``original_max_position_embeddings``)."""
        fields = {_HF_ALIASES.get(k, k): v for k, v in d.items()}
        unknown = sorted(set(fields) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(
                f"RopeScaling: unknown keys {unknown}; expected some of {sorted(cls.__dataclass_fields__)}"
            )
        if "type" not in fields or "factor" not in fields:
            raise ValueError(f"RopeScaling: a scaling dict needs 'type' and 'factor', got keys {sorted(d)}")
        return cls(**fields)


def _as_scaling(scaling: RopeScaling | dict[str, Any] | None) -> RopeScaling | None:
    if scaling is None or isinstance(scaling, RopeScaling):
        return scaling
    if isinstance(scaling, dict):
        return RopeScaling.from_dict(scaling)
    raise TypeError(f"RotaryEmbedding: scaling must be a RopeScaling, a dict or None, got {type(scaling).__name__}")


def llama3_inv_freq(inv_freq: Tensor, s: RopeScaling) -> Tensor:
    """Llama 3.1's frequency-dependent scaling of ``inv_freq (D/2,)``: keep the fast, divide the slow, blend between."""
    wavelength = 2 * math.pi / inv_freq
    slowed = inv_freq / s.factor
    t = (s.original_context_length / wavelength - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor)
    blended = (1 - t) * slowed + t * inv_freq
    out = torch.where(wavelength > s.original_context_length / s.low_freq_factor, slowed, blended)
    return torch.where(wavelength < s.original_context_length / s.high_freq_factor, inv_freq, out)


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate ``x (B, H, T, D)`` by the angles whose cos and sin are given: ``x · cos + rotate_half(x) · sin``, where
    ``rotate_half((x₁, x₂)) = (−x₂, x₁)`` on the halves of the last dim: a 90° turn of every pair ``(i, i + D/2)``.

    ``cos`` and ``sin`` are ``(T, D)`` (one set of positions for the batch) or ``(B, T, D)`` (per sequence), as
    :meth:`RotaryEmbedding.cos_sin` returns them; they are cast to ``x``'s dtype, so the output has x's dtype.
    """
    if not isinstance(x, Tensor) or x.dim() != 4:
        got = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
        raise ValueError(f"apply_rotary: x must have shape (B, H, T, D), got {got}")
    if cos.shape != sin.shape or cos.dim() not in (2, 3) or cos.shape[-2:] != x.shape[-2:]:
        raise ValueError(
            f"apply_rotary: cos and sin must both have shape (T, D) or (B, T, D) with (T, D) = {tuple(x.shape[-2:])} "
            f"from x {tuple(x.shape)}, got cos {tuple(cos.shape)} and sin {tuple(sin.shape)}"
        )
    if cos.dim() == 3:
        if cos.shape[0] not in (1, x.shape[0]):
            raise ValueError(f"apply_rotary: cos/sin batch {cos.shape[0]} does not match x's batch {x.shape[0]}")
        cos, sin = cos[:, None], sin[:, None]  # (B, 1, T, D): the same angles for every head
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin  # rotate_half(x) · sin


def _attention_factor(s: RopeScaling | None) -> float:
    """What cos and sin are multiplied by under scaling ``s``: YaRN's and LongRoPE's factor, else 1."""
    if s is not None and s.type == "yarn":
        return yarn_attention_factor(s)
    if s is not None and s.type == "longrope":
        return longrope_attention_factor(s.factor, s.original_context_length, s.attention_factor)
    return 1.0


class RotaryEmbedding:
    """RoPE for heads of width ``head_dim``: rotates queries and keys ``(B, H, T, D)`` by their positions.

    A plain object, not an ``nn.Module``: it holds no parameters and no buffers (the angles are recomputed from
    the positions on each call, D/2 frequencies, on the positions' device, so a ``.to(bfloat16)`` of the model
    cannot round them), and ``nn.Module.apply(fn)``, which weight initialisation uses to visit every submodule,
    would collide with :meth:`apply`.

    Args:
        head_dim: D, even (features rotate in pairs).
        context_length: the longest sequence the model was trained on; ``dynamic`` scaling starts beyond it.
            Positions are not checked against it: RoPE has no table, and the scalings exist to go longer.
        base: the θ of the frequencies ``base^(-2i/D)`` (10000 in Llama 2, 500000 in Llama 3).
        scaling: None, a :class:`RopeScaling`, or a dict of its fields (transformers' ``rope_scaling`` works).

    Example:
        >>> rope = RotaryEmbedding(head_dim=4, context_length=16)
        >>> q = k = torch.ones(1, 1, 3, 4)
        >>> q_rot, k_rot = rope.apply(q, k, torch.arange(3))
        >>> q_rot[0, 0, 0]                      # position 0: no rotation
        tensor([1., 1., 1., 1.])
    """

    def __init__(self, head_dim: int, context_length: int, base: float = 10000.0,
                 scaling: RopeScaling | dict[str, Any] | None = None) -> None:
        check_positive_int("RotaryEmbedding", "head_dim", head_dim)
        if head_dim % 2:
            raise ValueError(f"RotaryEmbedding: head_dim must be even (features rotate in pairs), got {head_dim}")
        check_positive_int("RotaryEmbedding", "context_length", context_length)
        _positive_float("RotaryEmbedding", "base", base)
        self.head_dim, self.context_length, self.base = head_dim, context_length, float(base)
        self.scaling = _as_scaling(scaling)
        if self.scaling is not None and self.scaling.type == "longrope":
            for name in ("short_factor", "long_factor"):
                if len(getattr(self.scaling, name)) != head_dim // 2:
                    raise ValueError(f"RotaryEmbedding: longrope's {name} needs head_dim/2 = {head_dim // 2} numbers "
                                     f"(one per frequency), got {len(getattr(self.scaling, name))}")
        #: cos and sin are multiplied by it (YaRN's and LongRoPE's; 1 for the other scalings)
        self.attention_factor = _attention_factor(self.scaling)
        self._fixed_inv_freq: dict[torch.device | str, Tensor] = {}  # device -> the frequencies, where they are fixed

    @property
    def rebuild_length(self) -> int | None:
        """The sequence length at which keys rotated earlier must all be rotated again: LongRoPE's L₀ + 1, where
        its frequencies switch from the short factors to the long ones for every position (transformers' Phi-3
        drops its cache there and recomputes). None for the other scalings: a cached key keeps its angles."""
        s = self.scaling
        return s.original_context_length + 1 if s is not None and s.type == "longrope" else None

    def inv_freq(self, seq_len: int | None = None, device: torch.device | str | None = None) -> Tensor:
        """The D/2 angular frequencies θ_i, float32, scaling applied; ``seq_len`` matters for ``dynamic`` only."""
        base: float | Tensor  # a tensor once dynamic scaling stretches it, as transformers computes it
        base, s, d = self.base, self.scaling, self.head_dim
        if s is not None and s.type == "longrope":
            long = seq_len is not None and seq_len > s.original_context_length
            assert s.long_factor is not None and s.short_factor is not None  # RopeScaling checked
            return longrope_inv_freq(base, d, s.long_factor if long else s.short_factor, device)
        if s is not None and s.type == "yarn":
            return yarn_inv_freq(base, d, s, device)
        if s is not None and s.type == "dynamic" and seq_len is not None and seq_len > self.context_length:
            # in float32 tensors, as transformers computes it (its length is a tensor there)
            length = torch.tensor(seq_len, dtype=torch.int64, device=device)
            stretch = s.factor * length / self.context_length - (s.factor - 1)
            base = base * stretch ** (d / (d - 2))  # NTK-aware: a larger base slows the low frequencies
        inv_freq = 1.0 / base ** (torch.arange(0, d, 2, dtype=torch.float32, device=device) / d)
        if s is None or s.type == "dynamic":
            return inv_freq
        if s.type == "linear":
            return inv_freq / s.factor
        return llama3_inv_freq(inv_freq, s)

    def cos_sin(self, positions: Tensor, dtype: torch.dtype = torch.float32,
                device: torch.device | str | None = None) -> tuple[Tensor, Tensor]:
        """cos and sin of the angles for integer ``positions (T,)`` or ``(B, T)``: each ``(T, D)`` or ``(B, T, D)``.

        Computed in float32 on ``device`` (default: the positions' device), then cast to ``dtype``. With
        ``dynamic`` scaling the length is max(positions) + 1, read back to the host.
        """
        if not isinstance(positions, Tensor) or positions.dim() not in (1, 2):
            got = tuple(positions.shape) if isinstance(positions, Tensor) else type(positions).__name__
            raise ValueError(f"RotaryEmbedding: positions must have shape (T,) or (B, T), got {got}")
        if positions.dtype.is_floating_point or positions.dtype.is_complex or positions.dtype == torch.bool:
            raise TypeError(f"RotaryEmbedding: positions must be an integer tensor, got dtype {positions.dtype}")
        device = positions.device if device is None else device
        seq_len, s = None, self.scaling
        if s is not None and s.type in ("dynamic", "longrope") and positions.numel():
            seq_len = int(positions.max()) + 1
        inv_freq = self._fixed_inv_freq.get(device) if seq_len is None else None
        if inv_freq is None:  # computed once per device where it depends on nothing else (not dynamic, not long)
            inv_freq = self.inv_freq(seq_len, device)
            if seq_len is None:
                self._fixed_inv_freq[device] = inv_freq
        angles = positions.to(device=device, dtype=torch.float32)[..., None] * inv_freq
        angles = torch.cat((angles, angles), dim=-1)  # pair (i, i + D/2) turns by the same angle
        cos, sin = angles.cos(), angles.sin()
        if self.attention_factor != 1.0:  # YaRN, LongRoPE: scores sharpened by its square
            cos, sin = cos * self.attention_factor, sin * self.attention_factor
        return cos.to(dtype), sin.to(dtype)

    def apply(self, q: Tensor, k: Tensor, positions: Tensor) -> tuple[Tensor, Tensor]:
        """Rotate queries ``(B, H, T, D)`` and keys ``(B, H_kv, T, D)`` at ``positions (T,)`` or ``(B, T)``.

        q and k keep their dtypes; with a KV cache, pass the positions of the new tokens only.
        """
        for name, x in (("q", q), ("k", k)):
            if not isinstance(x, Tensor) or x.dim() != 4 or x.shape[-1] != self.head_dim:
                got = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
                raise ValueError(f"RotaryEmbedding: {name} must have shape (B, H, T, {self.head_dim}), got {got}")
        cos, sin = self.cos_sin(positions, torch.float32, q.device)  # cast per tensor in apply_rotary
        return apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)

    __call__ = apply

    def __repr__(self) -> str:
        scaling = None if self.scaling is None else asdict(self.scaling)
        return (f"RotaryEmbedding(head_dim={self.head_dim}, context_length={self.context_length}, "
                f"base={self.base}, scaling={scaling})")
