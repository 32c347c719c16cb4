"""Checks on what a model is fed: token ids, before they index an embedding table."""

from __future__ import annotations

import torch
from torch import Tensor


def check_token_ids(idx: Tensor, vocab_size: int, owner: str) -> None:
    """``idx`` must be an integer ``(B, T)`` tensor with every id in ``[0, vocab_size)``."""
    if not isinstance(idx, Tensor):
        raise TypeError(f"{owner}: idx must be a torch.Tensor of token ids, got {type(idx).__name__}")
    if idx.dtype not in (torch.int64, torch.int32, torch.int16, torch.uint8, torch.int8):
        raise TypeError(f"{owner}: idx must hold integer token ids, got dtype {idx.dtype}")
    if idx.dim() != 2 or idx.shape[1] == 0:
        raise ValueError(f"{owner}: idx must have shape (B, T) with T >= 1, got {tuple(idx.shape)}")
    lo, hi = int(idx.min()), int(idx.max())
    if lo < 0 or hi >= vocab_size:
        raise ValueError(f"{owner}: token ids must be in [0, vocab_size={vocab_size}), got min {lo}, max {hi}")
