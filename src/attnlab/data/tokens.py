"""Token arrays: a corpus encoded once, cached on disk, memory-mapped, split and batched.

The cache file is named by a hash of the text and the tokenizer, so a second run on the same
corpus skips encoding, and a changed corpus or tokenizer never reads stale tokens. Ids are stored
as ``uint16`` when the vocabulary fits (≤ 65,536 ids), else ``uint32``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from attnlab.data.tokenizer import Tokenizer
from attnlab.files import atomic_write
from attnlab.i18n import tr


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16) if vocab_size <= 2**16 else np.dtype(np.uint32)


def encode_cached(text: str, tokenizer: Tokenizer, cache_dir: str | Path) -> np.ndarray:
    """``text`` encoded by ``tokenizer``, as a read-only memory-mapped array ``(N,)``, cached in ``cache_dir``."""
    dtype = token_dtype(tokenizer.vocab_size)
    key = hashlib.sha256(text.encode("utf-8") + b"\0" + tokenizer.to_json().encode("utf-8")).hexdigest()[:20]
    path = Path(cache_dir) / f"tokens-{key}.{dtype.name}"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        ids = tokenizer.encode(text).astype(dtype)
        atomic_write(path, ids.tofile)
    if path.stat().st_size == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r")


def train_val_split(tokens: np.ndarray, val_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """The first ``1 - val_fraction`` of the tokens for training, the rest for validation (no shuffling)."""
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(tr("val_fraction must be in (0, 1), got {val_fraction!r}", val_fraction=val_fraction))
    n_val = max(1, round(len(tokens) * val_fraction))
    return tokens[: len(tokens) - n_val], tokens[len(tokens) - n_val:]


def check_long_enough(tokens: np.ndarray, context_length: int, split: str) -> None:
    """A split must hold at least one window of ``context_length + 1`` tokens (inputs plus shifted targets)."""
    if len(tokens) < context_length + 1:
        raise ValueError(
            tr("data: the {split} split has {n_tokens} tokens, fewer than one block (context_length + 1 = {value}); "
               "use a longer corpus or a smaller context_length", split=split, n_tokens=len(tokens),
               value=context_length + 1)
        )


def stream_generator(seed: int, *path: object) -> torch.Generator:
    """A generator seeded from ``(seed, *path)``, e.g. ``(seed, "train", step, slot)``.

    Batches are a pure function of that path, so a resumed run draws exactly the batches an
    uninterrupted run would, and each data-parallel slot has its own independent stream.
    """
    digest = hashlib.sha256(repr((seed, *path)).encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") & (2**63 - 1))


def get_batch(tokens: np.ndarray, context_length: int, batch_size: int,
              generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """``batch_size`` random windows: inputs ``x (B, T)`` and next-token targets ``y (B, T)``, int64."""
    starts = torch.randint(len(tokens) - context_length, (batch_size,), generator=generator).numpy()
    rows = np.stack([np.asarray(tokens[s: s + context_length + 1], dtype=np.int64) for s in starts])
    windows = torch.from_numpy(rows)
    return windows[:, :-1], windows[:, 1:]
