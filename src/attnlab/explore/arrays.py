"""How the API writes arrays: nested JSON lists by default, or float32 bytes in base64 (what the page asks for).

``"encoding": "base64"`` writes an array as ``{"dtype": "float32", "shape": [...], "data": "<base64>"}``, the
little-endian float32 values in C order: the page reads it with one ``Float32Array``, the same values the model
computed (its weights are float32), in a third of the bytes of JSON text and without formatting a number each.

The overview of every layer × head: each ``(Tq, Tk)`` map averaged over blocks down to at most ``size × size``
cells (``adaptive_avg_pool2d``); a map that fits is the weights themselves.
"""

from __future__ import annotations

import base64
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

ENCODINGS = ("json", "base64")


def encoded(t: Tensor, encoding: str) -> Any:
    """``t`` as the API writes it (see the module)."""
    if encoding == "json":
        return t.tolist()
    data = t.detach().to(torch.float32).contiguous().numpy().astype("<f4", copy=False).tobytes()
    return {"dtype": "float32", "shape": list(t.shape), "data": base64.b64encode(data).decode("ascii")}


def decoded(value: Any) -> Tensor:
    """The inverse of :func:`encoded` (tests, and anything reading the API in Python)."""
    if isinstance(value, dict):
        raw = base64.b64decode(value["data"])
        return torch.frombuffer(bytearray(raw), dtype=torch.float32).reshape(value["shape"])
    return torch.tensor(value, dtype=torch.float32)


def overview(maps: list[Tensor], size: int) -> Tensor:
    """Per-layer ``(H, Tq, Tk)`` maps -> ``(L, H, min(size, Tq), min(size, Tk))`` block means."""
    stacked = torch.stack(maps)  # (L, H, Tq, Tk)
    tq, tk = stacked.shape[-2:]
    if tq <= size and tk <= size:
        return stacked
    flat = stacked.flatten(0, 1)[:, None]  # (L·H, 1, Tq, Tk)
    pooled = F.adaptive_avg_pool2d(flat, (min(size, tq), min(size, tk)))
    return pooled.view(*stacked.shape[:2], *pooled.shape[-2:])
