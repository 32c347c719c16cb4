"""Head roles in the style of Clark et al. (2019): each head's average attention to [CLS], [SEP] and punctuation,
layer by layer (their Figure 2), and the heads that look at the previous and the next token, drawn on a sentence."""

from __future__ import annotations

from typing import Any

from matplotlib.figure import Figure
from torch import Tensor

from attnlab.heads.roles import ROLE_NAMES
from attnlab.i18n import _, tr
from attnlab.viz.fonts import drawn_in_every_script, require_glyphs
from attnlab.viz.heatmap import draw_weights

SPECIAL = ("cls", "sep", "punct")  # the panels, one statistic each


@drawn_in_every_script
def special_tokens_figure(result: dict[str, Any]) -> Figure:
    """One panel per token kind: a dot per head at its layer, the layer's mean as a line, and what evenly spread
    attention would give (dashed), from ``result`` (what ``roles.json`` holds)."""
    layers = result["layers"]
    fig = Figure(figsize=(11, 3.8), layout="constrained")
    axes = fig.subplots(1, 3, sharey=True)
    for ax, role in zip(axes, SPECIAL, strict=True):
        for layer, heads in enumerate(layers):
            values = [head[role] for head in heads]
            offsets = [(h - (len(values) - 1) / 2) * 0.04 for h in range(len(values))]  # spread the dots a little
            ax.scatter([layer + o for o in offsets], values, s=12, alpha=0.7, color="tab:blue")
        ax.plot(range(len(layers)), [sum(h[role] for h in heads) / len(heads) for heads in layers], "-",
                color="tab:red", label=tr("layer mean"))
        if role in result.get("uniform", {}):
            ax.axhline(result["uniform"][role], color="grey", ls="--", lw=0.8, label=tr("evenly spread"))
        ax.set_title(tr("attention to {what}", what=_(ROLE_NAMES[role])))
        ax.set_xlabel(tr("layer"))
        ax.set_xticks(range(len(layers)))
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(tr("average attention weight"))
    axes[0].legend(fontsize=8)
    fig.suptitle(tr("{model}: each dot is a head, averaged over {queries} query tokens", model=result.get("model", ""),
                    queries=result["queries"]))
    return fig


@drawn_in_every_script
def positional_heads_figure(tokens: list[str], panels: list[tuple[Tensor, str]]) -> Figure:
    """Heads drawn on one sentence: ``panels`` of ``(weights (T, T), title)``."""
    families = require_glyphs("".join(tokens))
    t = len(tokens)
    size = min(max(3.5, 0.3 * t + 1.5), 9.0)
    fig = Figure(figsize=(len(panels) * size + 1.0, size + 0.6), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    image = None
    for ax, (weights, title) in zip(axes, panels, strict=True):
        image = draw_weights(ax, weights, tokens, families, annotate=False, labels=t <= 40)
        ax.set_title(title, fontsize=10)
    assert image is not None  # one panel at least
    fig.colorbar(image, ax=list(axes), label=tr("attention weight"), shrink=0.8)
    return fig
