"""Masks, in PyTorch's convention: a bool mask is True where a query *may* attend a key;
a float mask is *added* to the scores (0 to keep, -inf to forbid)."""

from __future__ import annotations

import torch
from torch import Tensor


def causal_mask(t_q: int, t_k: int | None = None, *, device: torch.device | str | None = None) -> Tensor:
    """Bool ``(Tq, Tk)`` mask, True where key j <= query i.

    Top-left aligned, exactly like ``torch.nn.functional.scaled_dot_product_attention(is_causal=True)``:
    query 0 sees key 0 only, whatever ``Tk`` is.

    Example:
        >>> causal_mask(3).int()
        tensor([[1, 0, 0],
                [1, 1, 0],
                [1, 1, 1]], dtype=torch.int32)
    """
    t_k = t_q if t_k is None else t_k
    for name, n in (("t_q", t_q), ("t_k", t_k)):
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"causal_mask: {name} must be a positive int, got {n!r}")
    return torch.ones(t_q, t_k, dtype=torch.bool, device=device).tril()


def padding_mask(attention_mask: Tensor) -> Tensor:
    """Turn a ``(B, T)`` padding mask (1 = real token, 0 = padding) into a bool key mask ``(B, 1, 1, T)``.

    The result broadcasts over heads and queries, so every query ignores the padded keys.

    Example:
        >>> padding_mask(torch.tensor([[1, 1, 0]])).shape
        torch.Size([1, 1, 1, 3])
    """
    if not isinstance(attention_mask, Tensor):
        raise TypeError(f"attention_mask must be a torch.Tensor, got {type(attention_mask).__name__}")
    if attention_mask.dim() != 2:
        raise ValueError(
            "attention_mask must have shape (B, T) with 1 for real tokens and 0 for padding, got shape "
            f"{tuple(attention_mask.shape)}"
        )
    if attention_mask.dtype != torch.bool:
        if torch.is_floating_point(attention_mask) or torch.is_complex(attention_mask):
            raise TypeError(f"attention_mask must be bool or integer 0/1, got dtype {attention_mask.dtype}")
        bad = (attention_mask != 0) & (attention_mask != 1)
        if bool(bad.any()):  # reads the values: the one host sync, here at the door
            raise ValueError(
                f"attention_mask must contain only 0 and 1, got {attention_mask[bad].unique().tolist()}"
            )
    return key_mask(attention_mask)


def additive_mask(mask: Tensor, dtype: torch.dtype) -> Tensor:
    """A bool mask (True = may attend) as the term added to the scores: 0 where allowed, -inf where not."""
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, float("-inf"))


def key_mask(attention_mask: Tensor) -> Tensor:
    """:func:`padding_mask` for a mask already checked at the door: ``(B, T)`` -> bool ``(B, 1, 1, T)``, no checks."""
    return attention_mask.bool()[:, None, None, :]


def merge_masks(
    attn_mask: Tensor | None, is_causal: bool, t_q: int, t_k: int, dtype: torch.dtype, device: torch.device
) -> Tensor | None:
    """One mask for the explicit path: ``attn_mask`` (bool or float) combined with the causal mask.

    Bool stays bool (AND); a float mask gets -inf where the causal mask forbids.
    """
    if not is_causal:
        return attn_mask
    causal = causal_mask(t_q, t_k, device=device)
    if attn_mask is None:
        return causal
    if attn_mask.dtype == torch.bool:
        return attn_mask & causal
    return attn_mask.to(dtype).masked_fill(~causal, float("-inf"))


def rows_with_keys(mask: Tensor) -> Tensor:
    """For a bool or float mask ``(..., Tq, Tk)``: bool ``(..., Tq, 1)``, True where a query may attend something."""
    allowed = mask if mask.dtype == torch.bool else mask != float("-inf")
    return allowed.any(dim=-1, keepdim=True)


def open_empty_rows(mask: Tensor, has_keys: Tensor) -> Tensor:
    """``mask`` with every key allowed in the rows where none was (``has_keys`` False).

    Such a row's softmax would be 0/0 = NaN, forward and backward. Opened, it is finite; the caller then
    sets the row's output (and weights) to 0. Works on the mask's own, usually small, broadcast shape, and
    never asks the device whether such rows exist.
    """
    if mask.dtype == torch.bool:
        return mask | ~has_keys
    return mask.masked_fill(~has_keys, 0.0)


def and_masks(mask: Tensor | None, other: Tensor | None) -> Tensor | None:
    """Both masks at once (broadcast): a key is allowed only where both allow it. None stands for "allow all".

    ``other`` is bool; ``mask`` bool (AND) or float (-inf where ``other`` forbids, its own values elsewhere).
    """
    if mask is None or other is None:
        return other if mask is None else mask
    if mask.dtype == torch.bool:
        return mask & other
    return mask.masked_fill(~other, float("-inf"))
