"""Patching's pictures: a layer × head grid per analysis (activation patching, attribution patching, direct logit
attribution), path patching's sender × receiver grids, effects one position at a time, and the induction circuit
over training. Text in the reader's language, drawn with the CJK fallback fonts (:func:`attnlab.viz.fonts.setup_fonts`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure

from attnlab.i18n import N_, _, tr
from attnlab.viz.fonts import setup_fonts

CMAP = "RdBu_r"  # diverging: a patch can push the metric either way
#: the parts of a direct logit attribution (attnlab.heads.logit_attribution), as a figure names them
PART_LABELS = {"embeddings": N_("embeddings"), "attention biases": N_("attention bias"),
               "feed-forward": N_("feed-forward"), "self-attention": N_("self-attention"),
               "final norm bias": N_("final norm bias"), "unembedding bias": N_("unembedding bias")}
#: what path patching goes through, per site
THROUGH = {"query": N_("through the receivers' queries"), "key": N_("through the receivers' keys"),
           "value": N_("through the receivers' values")}
LOST = {"query": N_("lost through the layer-1 queries"), "key": N_("lost through the layer-1 keys"),
        "value": N_("lost through the layer-1 values")}


def _norm(values: np.ndarray) -> TwoSlopeNorm:
    finite = values[np.isfinite(values)]
    extent = max(float(np.abs(finite).max()) if finite.size else 0.0, 1e-6)
    return TwoSlopeNorm(0.0, -extent, extent)


def _grid(ax, values: np.ndarray, families: list[str], row_label: str, col_label: str, rows: Sequence[str],
          cols: Sequence[str], write: bool = True):
    cmap = colormaps[CMAP].with_extremes(bad="#dddddd")  # a layer not measured: grey
    image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, norm=_norm(values), aspect="auto")
    if write:
        for i in range(values.shape[0]):
            for j in range(values.shape[1]):
                v = values[i, j]
                ax.text(j, i, "–" if not math.isfinite(v) else f"{v:.2f}", ha="center", va="center", fontsize=7,
                        color="black")
    ax.set_xticks(range(values.shape[1]), cols, fontsize=7, fontfamily=families)
    ax.set_yticks(range(values.shape[0]), rows, fontsize=7, fontfamily=families)
    ax.set_xlabel(col_label, fontfamily=families)
    ax.set_ylabel(row_label, fontfamily=families)
    return image


def _array(values: Any) -> np.ndarray:
    return np.array([[math.nan if v is None else v for v in row] for row in values], dtype=float)


def head_grid_figure(panels: Sequence[tuple[str, Any]], title: str, scale_label: str | None = None) -> Figure:
    """One layer × head grid per ``(title, values)`` panel (``values``: ``(num_layers, num_heads)`` nested lists;
    None or NaN: not measured), side by side, each value written in its cell."""
    families = setup_fonts()
    arrays = [_array(values) for _, values in panels]
    layers, heads = max(a.shape[0] for a in arrays), max(a.shape[1] for a in arrays)
    fig = Figure(figsize=(len(panels) * (0.7 * heads + 2.2), 0.55 * layers + 2.0), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(panels)))
    for ax, (panel_title, _values), values in zip(axes, panels, arrays, strict=True):
        image = _grid(ax, values, families, tr("layer"), tr("head"), [str(i) for i in range(values.shape[0])],
                      [str(j) for j in range(values.shape[1])])
        ax.set_title(panel_title, fontsize=9, fontfamily=families)
        bar = fig.colorbar(image, ax=ax, shrink=0.85)
        if scale_label:
            bar.set_label(scale_label, fontfamily=families, fontsize=8)
    fig.suptitle(title, fontfamily=families, fontsize=10)
    return fig


def position_grid_figure(values: Any, tokens: Sequence[str], title: str, position_label: str) -> Figure:
    """``values`` ``(num_layers, num_heads, T)``: one row per head (``L0 H0``, ...), one column per position,
    labelled with its token (CJK tokens drawn too)."""
    families = setup_fonts()
    array = np.array([[[math.nan if v is None else v for v in head] for head in layer] for layer in values],
                     dtype=float)
    layers, heads, length = array.shape
    rows = [tr("L{layer} H{head}", layer=i, head=j) for i in range(layers) for j in range(heads)]
    fig = Figure(figsize=(0.32 * length + 2.8, 0.3 * layers * heads + 1.8), layout="constrained")
    ax = fig.add_subplot()
    image = _grid(ax, array.reshape(layers * heads, length), families, tr("head"), position_label, rows,
                  list(tokens), write=False)
    ax.set_title(title, fontsize=9, fontfamily=families)
    fig.colorbar(image, ax=ax, shrink=0.85)
    return fig


def path_grid_figure(paths: dict, title: str) -> Figure:
    """Path patching from each layer-0 head (rows) to each layer-1 head (columns), one panel per receiving input
    (query, key, value): ``paths[sender][site]`` is ``[[value per receiver]]``."""
    families = setup_fonts()
    senders = sorted(paths, key=int)
    sites = list(paths[senders[0]])
    fig = Figure(figsize=(len(sites) * (0.7 * len(senders) + 2.4), 0.55 * len(senders) + 2.2), layout="constrained")
    arrays = {site: _array([paths[s][site][0] for s in senders]) for site in sites}
    shared = _norm(np.stack(list(arrays.values())))
    for ax, site in zip(np.atleast_1d(fig.subplots(1, len(sites))), sites, strict=True):
        image = _grid(ax, arrays[site], families, tr("sender: layer 0, head"), tr("receiver: layer 1, head"),
                      [str(s) for s in senders], [str(j) for j in range(arrays[site].shape[1])])
        image.set_norm(shared)
        ax.set_title(_(THROUGH[site]), fontsize=9, fontfamily=families)
    fig.colorbar(image, ax=fig.axes, shrink=0.85)
    fig.suptitle(title, fontfamily=families, fontsize=10)
    return fig


def circuit_training_figure(training: list[dict[str, Any]], phase_change: int | None) -> Figure:
    """Over training: the best prefix-matching score, the most one head's patch restores, and the share of the
    repeat's advantage lost through the layer-1 heads' queries, keys and values."""
    families = setup_fonts()
    steps = [e["step"] for e in training]
    fig = Figure(figsize=(8, 4.8), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(steps, [e["prefix_matching"] for e in training], "o-", ms=3, color="grey",
            label=tr("best prefix-matching score"))
    ax.plot(steps, [e["best_head_restores"] for e in training], "s-", ms=3, color="tab:purple",
            label=tr("the most one head's patch restores"))
    for site, colour in (("key", "tab:red"), ("query", "tab:blue"), ("value", "tab:green")):
        ax.plot(steps, [e[f"{site}_path"] for e in training], "o-", ms=3, color=colour,
                label=_(LOST[site]))
    if phase_change is not None:
        ax.axvline(phase_change, color="grey", ls=":", lw=1)
    ax.set_xlabel(tr("training step"), fontfamily=families)
    ax.set_ylabel(tr("score, or share of the clean-corrupted gap"), fontfamily=families)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, prop={"family": families, "size": 8})
    ax.set_title(tr("K-composition appears with the phase change"), fontfamily=families, fontsize=10)
    return fig


def logit_attribution_figure(heads: Any, parts: dict[str, Any], total: float, title: str) -> Figure:
    """Direct logit attribution: the heads' grid beside a bar of every other part (a part per layer: one bar each)."""
    families = setup_fonts()
    fig = Figure(figsize=(10, 3.6), layout="constrained")
    grid_ax, bar_ax = fig.subplots(1, 2, width_ratios=[1, 1.3])
    array = _array(heads)
    image = _grid(grid_ax, array, families, tr("layer"), tr("head"), [str(i) for i in range(array.shape[0])],
                  [str(j) for j in range(array.shape[1])])
    fig.colorbar(image, ax=grid_ax, shrink=0.85)
    grid_ax.set_title(tr("heads"), fontsize=9, fontfamily=families)
    names, values = [], []
    for name, value in parts.items():
        value = value if isinstance(value, list) else [value]
        for i, v in enumerate(value):
            label = _(PART_LABELS.get(name, name))
            names.append(label if len(value) == 1 else f"{label} {i}")
            values.append(v)
    bar_ax.barh(range(len(values)), values, color=["tab:red" if v > 0 else "tab:blue" for v in values])
    bar_ax.set_yticks(range(len(values)), names, fontsize=7, fontfamily=families)
    bar_ax.axvline(0, color="black", lw=0.6)
    bar_ax.set_title(tr("the other parts (the whole: {total:.3f})", total=total), fontsize=9, fontfamily=families)
    fig.suptitle(title, fontfamily=families, fontsize=10)
    return fig
