"""Ragged batches: prompts of different lengths decoded together, each row as it would be alone.

    prompts [[5, 6, 7], [8]]  ->  idx [[5, 6, 7],       attention_mask [[1, 1, 1],
                                       [0, 0, 8]]                       [0, 0, 1]]

Left padding puts every row's last token in the last column, so one decoding step serves them all. The padding
is masked out of every key, and each token's position counts the real tokens of its row (the model's door builds
both from ``attention_mask``), so row ``i`` computes what prompt ``i`` computes alone; afterwards the padding is
cut off again. This is what Hugging Face's ``generate`` does with a tokenizer's ``padding_side="left"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from attnlab.i18n import tr

#: the id written into padding: any id works, every padded key is masked
PAD_ID = 0


def encode_prompts(prompts: Sequence[Any], tokenizer: Any | None) -> list[list[int]]:
    """Each prompt as a list of ids: token lists as they are, strings through ``tokenizer.encode``; an empty
    prompt, or a string without a tokenizer, is a ValueError naming its index."""
    if isinstance(prompts, str | bytes) or not isinstance(prompts, Sequence) or not prompts:
        raise ValueError(tr("prompts: expected a non-empty list of prompts (token id lists, or strings with a "
                            "tokenizer), got {got!r}", got=prompts if isinstance(prompts, str) else type(prompts)))
    rows = []
    for i, prompt in enumerate(prompts):
        if isinstance(prompt, str):
            if tokenizer is None:
                raise ValueError(tr("prompts[{i}]: a string needs a tokenizer (generate_texts(model, tokenizer, "
                                    "prompts, ...)), got {prompt!r}", i=i, prompt=prompt[:40]))
            ids = [int(t) for t in tokenizer.encode(prompt)] if prompt else []
        elif isinstance(prompt, Tensor) and prompt.dim() == 1:
            ids = prompt.tolist()
        elif isinstance(prompt, Sequence) and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            ids = list(prompt)
        else:
            raise ValueError(tr("prompts[{i}]: expected a list of token ids or a string, got {got}", i=i,
                                got=type(prompt).__name__))
        if not ids:
            raise ValueError(tr("prompts[{i}]: an empty prompt; every prompt needs at least one token", i=i))
        rows.append(ids)
    return rows


def left_pad(rows: list[list[int]], device: torch.device | str | None = None) -> tuple[Tensor, Tensor]:
    """Id lists -> ``idx (B, T)`` left-padded with :data:`PAD_ID` and its ``attention_mask (B, T)`` (1 = real)."""
    t = max(len(r) for r in rows)
    idx = torch.full((len(rows), t), PAD_ID, dtype=torch.long)
    mask = torch.zeros(len(rows), t, dtype=torch.long)
    for i, r in enumerate(rows):
        idx[i, t - len(r):] = torch.tensor(r, dtype=torch.long)
        mask[i, t - len(r):] = 1
    return idx.to(device), mask.to(device)


def unpad(out: Tensor, rows: list[list[int]], stop_tokens: tuple[int, ...] = ()) -> list[list[int]]:
    """``out (B, T + n)`` (left-padded prompts and their new tokens) -> each row's prompt and new tokens, the
    padding cut off, and after a row's first stop token the copies that filled the row while others went on."""
    t = max(len(r) for r in rows)
    result = []
    for i, r in enumerate(rows):
        new = out[i, t:].tolist()
        stops = [j for j, token in enumerate(new) if token in stop_tokens]
        result.append(r + (new[: stops[0] + 1] if stops else new))
    return result
