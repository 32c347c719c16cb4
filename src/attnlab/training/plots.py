"""Figures written during training: the loss curve and the toy's attention heatmaps (PNG, atomic)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from attnlab.files import atomic_write


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path: str | Path) -> None:
    plt = _pyplot()
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight"))
    plt.close(fig)


def save_loss_curve(train: Sequence[tuple[int, float]], evals: Sequence[tuple[int, float, float]],
                    path: str | Path, title: str = "training loss") -> None:
    """Per-step training loss (thin) and the periodic train/val estimates (markers) against the step."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
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
    save_figure(fig, path)


def save_toy_heatmaps(results, sentences: Sequence[Sequence[str]], gloss: dict[str, str],
                      out_dir: str | Path) -> list[Path]:
    """One heatmap per (variant, sentence), rows queries, columns keys: ``toy_<variant>_<n>.png``.

    Drawn by :mod:`attnlab.viz.heatmap`, which draws the Chinese tokens with its CJK font; without
    that font (the ``viz`` extra), a plain grid labelled with English glosses is written instead.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        from attnlab.inspect import Capture
        from attnlab.viz.fonts import require_glyphs
        from attnlab.viz.heatmap import head_figure

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
            fig = head_figure(cap, annotate=True)
            path = out_dir / f"toy_{variant}_{s + 1}.png"
            atomic_write(path, lambda tmp, fig=fig: fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight"))
            paths.append(path)
    return paths


def save_gloss_grid(results, sentences: Sequence[Sequence[str]], gloss: dict[str, str], path: str | Path) -> None:
    """Every (variant, sentence) heatmap in one grid, tokens labelled by their English gloss."""
    plt = _pyplot()
    fig, axes = plt.subplots(len(results), len(sentences), figsize=(5.2 * len(sentences), 4.4 * len(results)),
                             squeeze=False, layout="constrained")
    for r, result in enumerate(results):
        for s, words in enumerate(sentences):
            ax = axes[r][s]
            w = result.weights[s].detach().numpy()
            im = ax.imshow(w, cmap="viridis", vmin=0.0, vmax=1.0)
            labels = [gloss[t] for t in words]
            ax.set_xticks(range(len(words)), labels, rotation=30, ha="right")
            ax.set_yticks(range(len(words)), labels)
            for i in range(w.shape[0]):
                for j in range(w.shape[1]):
                    ax.text(j, i, f"{w[i, j]:.2f}", ha="center", va="center", color="w" if w[i, j] < 0.6 else "k",
                            fontsize=8)
            ax.set_title(f"sentence {s + 1}, " + ("<PAD> masked" if result.mask_padding else "<PAD> attended"),
                         fontsize=10)
            ax.set_xlabel("key")
            ax.set_ylabel("query")
    fig.colorbar(im, ax=axes, shrink=0.6, label="attention weight")
    save_figure(fig, path)
