"""Argument checks shared by the torch ops (``attnlab.functional``) and their NumPy twin (``attnlab.numpy``).

They look only at shapes and plain Python values, so they import no torch: the twin must run without it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """``np.broadcast_shapes`` as a tuple (ValueError where they do not broadcast), answering the usual call, where
    the shapes are equal, without it: NumPy's takes ~3 µs, half of what torch's own attention call on small tensors
    takes."""
    first = tuple(shapes[0])
    for shape in shapes[1:]:  # compared, never hashed: torch.compile's symbolic sizes stay free
        if tuple(shape) != first:
            return tuple(np.broadcast_shapes(*shapes))
    return first


def qkv_batch(query: Sequence[int], key: Sequence[int], value: Sequence[int],
              enable_gqa: bool = False) -> tuple[int, ...]:
    """Check the shapes of q ``(..., Tq, D)``, k ``(..., Tk, D)``, v ``(..., Tk, Dv)``; return their batch shape.

    With ``enable_gqa`` (grouped-query attention, torch's semantics), q is ``(..., Hq, Tq, D)`` and k, v are
    ``(..., Hkv, Tk, D)`` with ``Hq`` a multiple of ``Hkv``: query head ``h`` reads key/value head
    ``h // (Hq // Hkv)``.
    """
    query, key, value = tuple(query), tuple(key), tuple(value)
    for name, shape in (("query", query), ("key", key), ("value", value)):
        if len(shape) < (3 if enable_gqa else 2):
            raise ValueError(f"{name} must have shape ({'..., H' if enable_gqa else '...'}, T, D), got shape {shape}")
    if enable_gqa:
        return _gqa_batch(query, key, value)
    if query[-1] != key[-1]:
        raise ValueError(f"query and key must have the same head dim (last dim), got query {query} and key {key}")
    if key[-2] != value[-2]:
        raise ValueError(
            f"key and value must have the same sequence length (dim -2), got key {key} and value {value}"
        )
    try:
        return broadcast_shapes(query[:-2], key[:-2], value[:-2])
    except ValueError:
        raise ValueError(f"query, key and value batch dims must broadcast, got {query}, {key}, {value}") from None


def _gqa_batch(query: tuple[int, ...], key: tuple[int, ...], value: tuple[int, ...]) -> tuple[int, ...]:
    h_q, h_k, h_v = query[-3], key[-3], value[-3]
    if h_k != h_v or h_q % h_k:
        raise ValueError("enable_gqa=True needs key and value with the same number of heads (dim -3), dividing the "
                         f"query's, got query {query}, key {key} and value {value}")
    # the heads dim aside, q, k and v follow the plain rules; the batch shape ends with the query's heads
    return (*qkv_batch((*query[:-3], *query[-2:]), (*key[:-3], *key[-2:]), (*value[:-3], *value[-2:])), h_q)


def check_mask_shape(mask: Sequence[int], batch: tuple[int, ...], t_q: int, t_k: int) -> None:
    """A mask must broadcast to the scores' shape ``(batch..., Tq, Tk)`` without growing it."""
    mask, target = tuple(mask), (*batch, t_q, t_k)
    try:
        ok = broadcast_shapes(mask, target) == target
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(
            f"attn_mask of shape {mask} does not broadcast to the scores' shape {target} (batch..., Tq, Tk)"
        )


def check_scale(scale: float | None) -> None:
    if scale is not None and (
        isinstance(scale, bool) or not isinstance(scale, int | float) or not math.isfinite(scale)
    ):
        raise ValueError(f"scale must be a finite float or None (meaning 1/sqrt(D)), got {scale!r}")


#: the messages of :func:`check_positive_int` and :func:`expect_one_of` (a caller whose user gave the value passes
#: ``tr``: ``attnlab.models.config`` marks them for the catalog)
POSITIVE_INT = "{owner}: {name} must be a positive int, got {value!r}"
ONE_OF = "{name}: expected {choices}, got {value!r}"


def plain(template: str, **fields: object) -> str:
    """A message as written, in English: how the building blocks word their errors (as torch does)."""
    return template.format(**fields)


def check_positive_int(owner: str, name: str, value: object, translate: Callable[..., str] = plain) -> None:
    """``value`` must be an int >= 1 (not a bool): else a ValueError ``owner: name must be a positive int, got …``.

    ``translate``: how the message is worded; plain English, as the building blocks raise (as torch does), or
    ``attnlab.i18n.tr`` where a user's input reaches the check (a config the command line fills).
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(translate(POSITIVE_INT, owner=owner, name=name, value=value))


def check_choice(name: str, value: str, valid: Sequence[str]) -> None:
    if value not in valid:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, valid))}, got {value!r}")


def expect_one_of(name: str, value: object, choices: Sequence[str], translate: Callable[..., str] = plain) -> None:
    """``value`` must be one of ``choices``: else a ValueError ``name: expected 'a' or 'b', got 'c'`` (worded by
    ``translate``, as in :func:`check_positive_int`)."""
    if value not in choices:
        quoted = [repr(c) for c in choices]
        listed = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
        raise ValueError(translate(ONE_OF, name=name, choices=listed, value=value))
