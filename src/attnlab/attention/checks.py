"""What the attention modules check at their door, once: the input's shape, the padding mask, the length.

The checks read shapes and dtypes; only a ``(B, T)`` padding mask given by the caller has its values read
(must be 0/1), since that is where a wrong mask enters. A model that already checked its mask passes the
converted ``attn_mask`` instead, which is trusted as it is.
"""

from __future__ import annotations

from typing import overload

import torch
from torch import Tensor

from attnlab.functional.masks import padding_mask


def as_batched(x: Tensor, d_in: int | None, owner: str, name: str = "x") -> tuple[Tensor, bool]:
    """Check ``x`` is ``(B, T, d_in)`` or unbatched ``(T, d_in)`` (any width if ``d_in`` is None).

    Returns ``x`` as ``(B, T, d_in)`` and whether it was unbatched.
    """
    if not isinstance(x, Tensor):
        raise TypeError(f"{owner}: {name} must be a torch.Tensor, got {type(x).__name__}")
    if not torch.is_floating_point(x):
        raise TypeError(f"{owner}: {name} must be a floating-point tensor (embeddings), got dtype {x.dtype}")
    if x.dim() not in (2, 3) or (d_in is not None and x.shape[-1] != d_in):
        d = "D" if d_in is None else d_in
        raise ValueError(f"{owner}: {name} must have shape (B, T, {d}) or (T, {d}), got {tuple(x.shape)}")
    return (x.unsqueeze(0), True) if x.dim() == 2 else (x, False)


def check_length(t: int, context_length: int | None, owner: str) -> None:
    if context_length is not None and t > context_length:
        raise ValueError(f"{owner}: sequence length {t} is longer than context_length={context_length}")


@overload
def key_padding(attention_mask: Tensor, x: Tensor, owner: str) -> Tensor: ...
@overload
def key_padding(attention_mask: None, x: Tensor, owner: str) -> None: ...
@overload
def key_padding(attention_mask: Tensor | None, x: Tensor, owner: str) -> Tensor | None: ...
def key_padding(attention_mask: Tensor | None, x: Tensor, owner: str) -> Tensor | None:
    """``(B, T)`` padding mask of the keys' sequence ``x (B, T, D)`` (1 = real token) -> bool ``(B, 1, 1, T)``."""
    if attention_mask is None:
        return None
    if not isinstance(attention_mask, Tensor):
        raise TypeError(f"{owner}: attention_mask must be a torch.Tensor, got {type(attention_mask).__name__}")
    if attention_mask.dim() == 1 and x.shape[0] == 1:
        attention_mask = attention_mask.unsqueeze(0)  # unbatched input, unbatched mask
    if tuple(attention_mask.shape) != tuple(x.shape[:2]):
        raise ValueError(
            f"{owner}: attention_mask must have shape (B, T) = {tuple(x.shape[:2])}, got {tuple(attention_mask.shape)}"
        )
    return padding_mask(attention_mask).to(x.device)


def unbatch(out: Tensor, weights: Tensor | None, unbatched: bool, return_weights: bool):
    """Undo :func:`as_batched` on the output (and weights), and return what was asked for."""
    if unbatched:
        out = out.squeeze(0)
        weights = None if weights is None else weights.squeeze(0)
    return (out, weights) if return_weights else out


def check_head_mask(head_mask: object, shape: tuple[int, ...], owner: str) -> Tensor:
    """A head mask (1 keeps a head, 0 removes its output; any float scales it) of exactly ``shape``: ``(H,)`` for
    one attention module, ``(num_layers, H)`` for a model. Floating point, so its gradient can be asked for."""
    if not isinstance(head_mask, Tensor):
        raise TypeError(f"{owner}: head_mask must be a torch.Tensor, got {type(head_mask).__name__}")
    if not torch.is_floating_point(head_mask):
        raise TypeError(f"{owner}: head_mask must be a floating-point tensor (1 = keep a head, 0 = remove it), got "
                        f"dtype {head_mask.dtype}")
    if tuple(head_mask.shape) != tuple(shape):
        names = "(num_heads,)" if len(shape) == 1 else "(num_layers, num_heads)"
        raise ValueError(f"{owner}: head_mask must have shape {names} = {tuple(shape)}, got {tuple(head_mask.shape)}")
    return head_mask


def mask_heads(context: Tensor, head_mask: Tensor | None, owner: str) -> Tensor:
    """``context (B, H, T, head_dim)`` with head h multiplied by ``head_mask[h]`` (Michel et al., 2019): what a
    module does before it merges the heads, so a masked head adds nothing to ``out_proj``'s input."""
    if head_mask is None:
        return context
    check_head_mask(head_mask, (context.shape[1],), owner)
    return context * head_mask.to(device=context.device, dtype=context.dtype)[:, None, None]


def check_dropout(owner: str, dropout: float) -> None:
    """A module's dropout probability, checked when it is built (the op trusts it afterwards)."""
    if isinstance(dropout, bool) or not isinstance(dropout, int | float) or not 0.0 <= dropout < 1.0:
        raise ValueError(f"{owner}: dropout must be in [0, 1), got {dropout!r}")
