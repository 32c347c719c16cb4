"""Gemma 4's attention: values normalised, values that are the keys (``k_eq_v``), and layers that read an earlier
layer's keys and values instead of computing their own (shared-KV layers).

It is the one attention module (:class:`~attnlab.attention.MultiHeadAttention`) with three changes, each one line of
its arithmetic:

* **scale 1, q/k/v norms.** Queries and keys are RMS-normalised per head (QK-norm, a gain ``w`` each) and so are the
  values, without a gain: ``v / √(mean(v²) + ε)``. With unit-RMS queries and keys the scores need no ``1/√d``;
  the spec's ``scale`` is 1.
* **k_eq_v** (transformers' ``attention_k_eq_v``, Gemma 4's global layers): there is no ``W_value``; the values are
  the key projection itself, before the keys' norm and RoPE (then normalised as values are). A global layer's cache
  still holds both (the keys rotated, the values not).
* **shared-KV layers** (the last ``num_kv_shared_layers`` layers): no ``W_key``, ``W_value`` or ``k_norm``. Each
  attends, with queries of its own, to the keys, values and mask that the last earlier layer of its kind (sliding
  or global) attended to in the same call: that layer's keys after its cache (the whole past, or its window's
  ring), so nothing is recomputed and nothing more is cached.

A :class:`SharedKV` carries them from the owner to its readers during one call of the model: the owner
:meth:`~SharedKV.hold`\\ s what it attended to, a reader :meth:`~SharedKV.read`\\ s it. The model makes one per owner
for each forward pass and hands it to the owner and to its readers as ``shared_kv``.

Example:
    >>> spec = SharedKVAttentionSpec(AttentionSpec(32, 32, 4, num_kv_heads=2, scale=1.0), k_eq_v=True)
    >>> attn = spec.build()
    >>> attn.W_value is None, tuple(attn(torch.randn(1, 5, 32)).shape)
    (True, (1, 5, 32))
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.attention.cache import LayerCache
from attnlab.attention.checks import as_batched, mask_heads, unbatch
from attnlab.attention.grouped_query import GroupedQueryAttention
from attnlab.attention.multihead import RotaryLike
from attnlab.attention.spec import AttentionSpec


class SharedKV:
    """What an owner layer attended to, for the layers that share its keys: ``keys, values (B, Hkv, L, hd)``, the
    ``mask`` broadcastable to the scores ``(B, H, T, L)`` (None: none) and whether the kernel's own causal mask
    applies (``is_causal``, top-left aligned: a call without a cache)."""

    def __init__(self) -> None:
        self.held: tuple[Tensor, Tensor, Tensor | None, bool] | None = None

    def hold(self, keys: Tensor, values: Tensor, mask: Tensor | None, is_causal: bool) -> None:
        """The owner's keys and values as its queries saw them (after its cache), and what each query saw."""
        self.held = (keys, values, mask, is_causal)

    def read(self, reader: str) -> tuple[Tensor, Tensor, Tensor | None, bool]:
        """``(keys, values, mask, is_causal)`` held by the owner; ``reader`` names the layer in the error when the
        owner has not run yet in this call."""
        if self.held is None:
            raise ValueError(f"{reader}: shares the keys and values of an earlier layer, which has not run in this "
                             "call (the owner runs first and hands them over in the same SharedKV)")
        return self.held


@dataclass(frozen=True)
class SharedKVAttentionSpec:
    """Gemma 4's attention but its weights: the one module's spec (heads, head size, window, QK-norm, scale) and
    what Gemma 4 adds.

    Attributes:
        attention: the :class:`~attnlab.attention.spec.AttentionSpec` of its projections, heads and kernel.
        value_norm_eps: the ε of the values' RMSNorm (no gain); None: the values as projected.
        k_eq_v: the values are the key projection (no ``W_value``).
        kv_shared: no key or value projections: the layer reads an earlier layer's through ``shared_kv``.
    """

    attention: AttentionSpec
    value_norm_eps: float | None = None
    k_eq_v: bool = False
    kv_shared: bool = False

    def __post_init__(self) -> None:
        a = self.attention
        if not isinstance(a, AttentionSpec):
            raise TypeError(f"SharedKVAttentionSpec: attention must be an AttentionSpec, got {type(a).__name__}")
        eps = self.value_norm_eps
        if eps is not None and (isinstance(eps, bool) or not isinstance(eps, int | float) or not math.isfinite(eps)
                                or eps <= 0):
            raise ValueError(f"{a.owner}: value_norm_eps must be None or a finite number > 0 (the ε of the values' "
                             f"RMSNorm), got {eps!r}")
        if self.k_eq_v and self.kv_shared:
            raise ValueError(f"{a.owner}: k_eq_v makes the values from the layer's own key projection, and kv_shared "
                             "leaves it none: give one or the other")

    @property
    def d_in(self) -> int:
        return self.attention.d_in

    def build(self, rotary: RotaryLike | None = None) -> SharedKVAttention:
        """The module (RoPE by ``rotary``, shared with the model's other layers of its kind)."""
        return SharedKVAttention(self, rotary)


class SharedKVAttention(GroupedQueryAttention):
    """Gemma 4's attention (see the module docstring): ``(B, T, d_in)`` -> ``(B, T, d_out)``; with
    ``return_weights`` also ``(B, H, T, L)``. Built from a :class:`SharedKVAttentionSpec`.

    Called as the one module is (self-attention, a cache, a padding mask, ``positions``, ``head_mask``), plus
    ``shared_kv``: an owner holds what it attended to there; a shared-KV layer reads it, its mask included (so its
    own ``attn_mask`` is not read, and it takes no cache: give it ``positions``, it has no cache of its own to count
    them). ``attnlab.inspect.capture`` records an owner's
    queries, keys and values as its scores saw them (normalised, rotated); a shared-KV layer says what it is
    (``not_one_softmax``: its keys are not its own to show), so ``explain`` names it rather than work through it.
    """

    def __init__(self, spec: SharedKVAttentionSpec, rotary: RotaryLike | None = None) -> None:
        nn.Module.__init__(self)
        if not isinstance(spec, SharedKVAttentionSpec):
            raise TypeError(f"SharedKVAttention: spec must be a SharedKVAttentionSpec, got {type(spec).__name__}")
        self.build(spec.attention, rotary)
        self.shared_spec, self.value_norm_eps = spec, spec.value_norm_eps
        if spec.kv_shared:  # an earlier layer's keys and values: no maps or norm for them (None: not in the state)
            self.W_key = self.W_value = None  # type: ignore[assignment]
            self.not_one_softmax = "shared keys"
            if spec.attention.qk_norm is not None:
                self.k_norm = None  # type: ignore[assignment]
        elif spec.k_eq_v:  # the key projection is the values too
            self.W_value = None  # type: ignore[assignment]

    def forward(self, x: Tensor, memory: Tensor | None = None, *, attention_mask: Tensor | None = None,
                attn_mask: Tensor | None = None, positions: Tensor | None = None, return_weights: bool = False,
                kv_cache: LayerCache | None = None, memory_kv: tuple[Tensor, Tensor] | None = None,
                head_mask: Tensor | None = None, shared_kv: SharedKV | None = None):
        """Self-attention of ``x``, its own keys or an earlier layer's (``shared_kv``); arguments and shapes:
        :meth:`MultiHeadAttention.forward`'s."""
        owner = type(self).__name__
        if memory is not None or memory_kv is not None:
            raise ValueError(f"{owner}: Gemma 4's attention is self-attention; give no memory or memory_kv")
        x, unbatched = as_batched(x, self.d_in, owner)                             # (B, T, d_in)
        b, t, _ = x.shape
        if self.shared_spec.kv_shared:
            if kv_cache is not None:
                raise ValueError(f"{owner}: a shared-KV layer keeps no cache (its owner's holds the keys it reads)")
            if not isinstance(shared_kv, SharedKV):
                raise ValueError(f"{owner}: a shared-KV layer attends to an earlier layer's keys and values; give "
                                 f"them as shared_kv (a SharedKV), got {type(shared_kv).__name__}")
            queries = self.shared_queries(x, positions)                            # (B, H, T, hd)
            keys, values, mask, is_causal = shared_kv.read(owner)                  # the owner's, (B, Hkv, L, hd)
        else:
            # 1-2. projections, heads, norms and RoPE; the cache's keys first, and what each query sees
            queries, keys, values = self.heads(x, None, None, positions, kv_cache)
            mask = attn_mask if attention_mask is None else self.padding(attention_mask, attn_mask, keys, kv_cache)
            keys, values, mask, is_causal = self.visible(keys, values, mask, t, kv_cache)
            if shared_kv is not None:  # the later layers of this kind read them there
                shared_kv.hold(keys, values, mask, is_causal)
        # 3. scores Q Kᵀ (scale 1), masked, softmax over the keys, weighted sum of the values
        context, weights = self.attend(queries, keys, values, mask, is_causal, return_weights)  # (B, H, T, hd)
        # 4. merge the heads back into d_out, then mix them
        if head_mask is not None:
            context = mask_heads(context, head_mask, owner)
        out = self.out_proj(context.transpose(1, 2).reshape(b, t, -1))            # (B, T, d_out)
        return unbatch(out, weights, unbatched, return_weights) if unbatched or return_weights else out

    def project_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Step 1: ``W_query(x)``, ``W_key(x)`` and ``W_value(x)``, or with ``k_eq_v`` the key projection twice."""
        keys = self.W_key(x)
        return self.W_query(x), keys, keys if self.W_value is None else self.W_value(x)

    def split_heads(self, queries, keys, values):
        """Step 2 as the one module does it, then each value head RMS-normalised (no gain) in float32."""
        queries, keys, values = super().split_heads(queries, keys, values)
        if values is not None and self.value_norm_eps is not None:
            values = F.rms_norm(values.float(), (values.shape[-1],), eps=self.value_norm_eps).to(values.dtype)
        return queries, keys, values

    def shared_queries(self, x: Tensor, positions: Tensor | None) -> Tensor:
        """A shared-KV layer's steps 1 and 2: queries ``(B, H, T, hd)``, normalised and rotated to ``positions``
        (default ``0..T−1``) as its owner's keys were."""
        queries = self.split_heads(self.W_query(x), None, None)[0]
        if self.rotary is None:
            return queries
        positions = torch.arange(x.shape[1], device=x.device) if positions is None else positions
        return self.rotary.apply(queries, queries[:, :0], positions)[0]  # no keys of its own to turn

    def scored_heads(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """As :meth:`MultiHeadAttention.scored_heads`; a shared-KV layer's queries and no keys or values (``(H, 0,
        hd)``: they are its owner's, made in the owner's call)."""
        if not self.shared_spec.kv_shared:
            return super().scored_heads(x)
        queries = self.shared_queries(x[None], None)[0]
        return queries, queries[:, :0], queries[:, :0]

    def extra_repr(self) -> str:
        s = self.shared_spec
        extra = "".join(f", {name}=True" for name in ("k_eq_v", "kv_shared") if getattr(s, name))
        return f"{super().extra_repr()}, value_norm_eps={s.value_norm_eps}{extra}"
