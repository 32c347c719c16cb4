"""Figures written during training: the loss curve and the toy's attention heatmaps (PNG, atomic).

Figures are built with ``matplotlib.figure.Figure`` (no pyplot, no window) and written by
:func:`attnlab.viz.files.save_figure`; the heatmaps are drawn by :mod:`attnlab.viz.heatmap`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from matplotlib.figure import Figure

from attnlab.viz.files import save_figure

DPI = 110


def save_loss_curve(train: Sequence[tuple[int, float]], evals: Sequence[tuple[int, float, float]],
                    path: str | Path, title: str = "training loss") -> None:
    """Per-step training loss (thin) and the periodic train/val estimates (markers) against the step."""
    fig = Figure(figsize=(7, 4))
    ax = fig.add_subplot()
    if train:
        ax.plot(*zip(*train, strict=True), lw=0.6, alpha=0.5, label="train (per step)")
    if evals:
        steps, tr, va = zip(*evals, strict=True)
        ax.plot(steps, tr, "o-", ms=3, label="train (eval)")
        ax.plot(steps, va, "s-", ms=3, label="val (eval)")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats / token)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    save_figure(fig, path, dpi=DPI)


def save_toy_heatmaps(results, sentences: Sequence[Sequence[str]], gloss: dict[str, str],
                      out_dir: str | Path) -> list[Path]:
    """One heatmap per (variant, sentence), rows queries, columns keys: ``toy_<variant>_<n>.png``.

    Drawn by :mod:`attnlab.viz.heatmap`, which draws the Chinese tokens with its CJK font; without
    that font (the ``viz`` extra), a plain grid labelled with English glosses is written instead.
    """
    from attnlab.inspect import Capture
    from attnlab.viz.fonts import require_glyphs
    from attnlab.viz.heatmap import head_figure

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        require_glyphs("".join("".join(s) for s in sentences))
    except ImportError:
        path = out_dir / "toy_attention.png"
        save_gloss_grid(results, sentences, gloss, path)
        return [path]
    paths = []
    for result in results:
        variant = "masked" if result.mask_padding else "unmasked"
        for s, words in enumerate(sentences):
            title = f"toy, sentence {s + 1}: <PAD> {'masked' if result.mask_padding else 'attended'}"
            cap = Capture(tokens=list(words), attentions=[result.weights[s][None]], model_name=title)
            paths.append(save_figure(head_figure(cap, annotate=True), out_dir / f"toy_{variant}_{s + 1}.png",
                                     dpi=DPI))
    return paths


def save_gloss_grid(results, sentences: Sequence[Sequence[str]], gloss: dict[str, str], path: str | Path) -> None:
    """Every (variant, sentence) heatmap in one grid, tokens labelled by their English gloss."""
    from attnlab.viz.fonts import setup_fonts
    from attnlab.viz.heatmap import draw_weights

    families = setup_fonts()  # Latin only here: the glosses need nothing more
    fig = Figure(figsize=(5.2 * len(sentences), 4.4 * len(results)), layout="constrained")
    axes = fig.subplots(len(results), len(sentences), squeeze=False)
    image = None
    for r, result in enumerate(results):
        for s, words in enumerate(sentences):
            ax = axes[r][s]
            image = draw_weights(ax, result.weights[s], [gloss[t] for t in words], families, annotate=True)
            ax.set_title(f"sentence {s + 1}, " + ("<PAD> masked" if result.mask_padding else "<PAD> attended"),
                         fontsize=10)
    fig.colorbar(image, ax=axes, shrink=0.6, label="attention weight")
    save_figure(fig, path, dpi=DPI)
