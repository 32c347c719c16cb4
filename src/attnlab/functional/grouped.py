"""Grouped-query attention without copying the keys and values: fold each group's query heads into rows.

With ``enable_gqa``, query head h reads key/value head ``h // groups``. The plain way repeats every key/value head
``groups`` times (``repeat_interleave``), which copies the whole KV cache at every decoding step: the very
memory traffic GQA exists to save. The same arithmetic without the copy: the ``groups`` query heads that share a
key/value head are stacked as extra query rows of that head,

    q (..., Hkv · groups, Tq, D)  ->  (..., Hkv, groups · Tq, D)      row g · Tq + i = query i of member g

so one attention over the ``Hkv`` heads computes all of them, and the output (and weights) unfold back to
``(..., Hq, Tq, ·)``. A mask travels with its rows: one shared by every head is tiled ``groups`` times along the
rows; one per query head is folded exactly like the queries.
"""

from __future__ import annotations

from torch import Tensor


def fold_groups(query: Tensor, attn_mask: Tensor | None, groups: int) -> tuple[Tensor, Tensor | None]:
    """``query (..., Hq, Tq, D)`` -> ``(..., Hq / groups, groups · Tq, D)``, and the mask to match."""
    *batch, h_q, t_q, d = query.shape
    h_kv = h_q // groups
    folded = query.reshape(*batch, h_kv, groups * t_q, d)
    if attn_mask is None:
        return folded, None
    per_head = attn_mask.dim() >= 3 and attn_mask.shape[-3] == h_q and h_q > 1
    if per_head:  # (..., Hq, Tq, Tk): fold its heads like the queries'
        m = attn_mask.expand(*attn_mask.shape[:-2], t_q, attn_mask.shape[-1])
        return folded, m.reshape(*m.shape[:-3], h_kv, groups * t_q, m.shape[-1])
    if attn_mask.dim() < 2 or attn_mask.shape[-2] == 1:  # one row for every query (padding): broadcasts as it is
        return folded, attn_mask
    reps = [1] * attn_mask.dim()
    reps[-2] = groups  # the same Tq rows for each member of the group
    return folded, attn_mask.repeat(*reps)


def unfold_groups(t: Tensor, groups: int) -> Tensor:
    """``(..., Hkv, groups · Tq, X)`` -> ``(..., Hkv · groups, Tq, X)``: the output or the weights, per query head."""
    *batch, h_kv, rows, x = t.shape
    return t.reshape(*batch, h_kv * groups, rows // groups, x)
