"""The tutorial's toy: one self-attention layer taught to reconstruct its own input.

Two short Chinese sentences, padded to four tokens::

    寫 代碼 的 中年人          ("the middle-aged man who writes code")
    天天 寫 代碼 <PAD>        ("writes code every day")

Each token has a fixed random 16-d embedding. One trainable self-attention layer (``W_query``,
``W_key``, ``W_value`` and ``out_proj``, i.e. :class:`attnlab.attention.MultiHeadAttention` with
one head and no causal mask) is trained with Adam (lr 1e-3, 200 full-batch epochs) to output the
embeddings it was given (MSE). The embeddings are the targets, so they are frozen: trainable
targets would let both sides collapse to zero.

The tutorial lets ``<PAD>`` take part like any word, so real tokens attend to padding. The fixed
variant (``mask_padding=True``) masks ``<PAD>`` as a key and leaves the padded position out of the
loss; :func:`toy_step` trains both from the same seed and draws their heatmaps side by side.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from matplotlib.figure import Figure
from torch import Tensor, nn

from attnlab.attention import MultiHeadAttention
from attnlab.demo.context import Demo, one_thread
from attnlab.i18n import tr
from attnlab.inspect import Capture
from attnlab.viz.figures import save_figure
from attnlab.viz.fonts import require_glyphs, setup_fonts
from attnlab.viz.heatmap import draw_weights, head_figure

DPI = 110

VOCAB = ["寫", "代碼", "的", "中年人", "天天", "<PAD>"]
PAD = VOCAB.index("<PAD>")
SENTENCES = [["寫", "代碼", "的", "中年人"], ["天天", "寫", "代碼", "<PAD>"]]
GLOSS = {"寫": "write", "代碼": "code", "的": "'s", "中年人": "mid-aged man", "天天": "every day", "<PAD>": "<PAD>"}


@dataclass(frozen=True)
class ToyResult:
    """What one toy run produced: ``losses[e]`` after epoch ``e + 1``; weights ``(2, 4, 4)`` (sentence, query, key)."""

    mask_padding: bool
    losses: list[float]
    weights: Tensor


def token_ids() -> Tensor:
    """The two sentences as ids ``(2, 4)``."""
    return torch.tensor([[VOCAB.index(w) for w in s] for s in SENTENCES])


class ToyAttention(nn.Module):
    """A frozen embedding followed by one single-head, non-causal self-attention layer."""

    def __init__(self, embed_dim: int = 16) -> None:
        super().__init__()
        self.embedding = nn.Embedding(len(VOCAB), embed_dim)
        self.embedding.weight.requires_grad_(False)
        self.attention = MultiHeadAttention(embed_dim, embed_dim, num_heads=1, is_causal=False)

    def forward(self, ids: Tensor, attention_mask: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """ids ``(B, T)`` -> (output ``(B, T, D)``, embeddings ``(B, T, D)``, weights ``(B, T, T)``)."""
        x = self.embedding(ids)
        out, weights = self.attention(x, attention_mask=attention_mask, return_weights=True)
        return out, x, weights[:, 0]


def train_toy(mask_padding: bool, seed: int = 123, epochs: int = 200, lr: float = 1e-3, embed_dim: int = 16,
              log: Callable[[int, float], None] | None = None, log_every: int = 20) -> ToyResult:
    """Train the toy layer; ``log(epoch, loss)`` is called every ``log_every`` epochs."""
    torch.manual_seed(seed)
    model = ToyAttention(embed_dim)
    ids = token_ids()
    real = (ids != PAD).long()  # (B, T) 1 = real token
    mask = real if mask_padding else None
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
    losses = []
    with torch.enable_grad(), one_thread():
        for epoch in range(1, epochs + 1):
            out, target, _ = model(ids, mask)
            err = (out - target).pow(2).mean(dim=-1)  # (B, T)
            loss = err.mean() if not mask_padding else (err * real).sum() / real.sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            if log is not None and epoch % log_every == 0:
                log(epoch, loss.item())
    with torch.no_grad():
        _, _, weights = model(ids, mask)
    return ToyResult(mask_padding, losses, weights)


def save_toy_heatmaps(results: Sequence[ToyResult], out_dir: str | Path) -> list[Path]:
    """One heatmap per (variant, sentence), rows queries, columns keys: ``toy_<variant>_<n>.png``.

    The Chinese tokens are drawn with the packaged CJK font; without it (the ``viz`` extra), one grid labelled
    with English glosses is written instead (:func:`save_gloss_grid`).
    """
    out_dir = Path(out_dir)
    try:
        require_glyphs("".join("".join(s) for s in SENTENCES))
    except ImportError:
        return [save_gloss_grid(results, out_dir / "toy_attention.png")]
    paths = []
    for result in results:
        variant = "masked" if result.mask_padding else "unmasked"
        for s, words in enumerate(SENTENCES):
            title = (tr("toy, sentence {n}: <PAD> masked", n=s + 1) if result.mask_padding
                     else tr("toy, sentence {n}: <PAD> attended", n=s + 1))
            cap = Capture(tokens=list(words), attentions=[result.weights[s][None]], model_name=title)
            paths.append(save_figure(head_figure(cap, annotate=True), out_dir / f"toy_{variant}_{s + 1}.png",
                                     dpi=DPI))
    return paths


def save_gloss_grid(results: Sequence[ToyResult], path: str | Path) -> Path:
    """Every (variant, sentence) heatmap in one grid, tokens labelled by their English gloss."""
    families = setup_fonts()  # Latin only here: the glosses need nothing more
    fig = Figure(figsize=(5.2 * len(SENTENCES), 4.4 * len(results)), layout="constrained")
    axes = fig.subplots(len(results), len(SENTENCES), squeeze=False)
    image = None
    for r, result in enumerate(results):
        for s, words in enumerate(SENTENCES):
            ax = axes[r][s]
            image = draw_weights(ax, result.weights[s], [GLOSS[t] for t in words], families, annotate=True)
            ax.set_title(tr("toy, sentence {n}: <PAD> masked", n=s + 1) if result.mask_padding
                         else tr("toy, sentence {n}: <PAD> attended", n=s + 1), fontsize=10)
    assert image is not None  # one panel at least
    fig.colorbar(image, ax=axes, shrink=0.6, label=tr("attention weight"))
    return save_figure(fig, path, dpi=DPI)


def toy_step(demo: Demo) -> None:
    """One self-attention layer learns to reconstruct two Chinese sentences (MSE); heatmaps saved."""
    console = demo.console
    console.rule(tr("[bold]The toy: one self-attention layer taught to copy its input"))
    for words in SENTENCES:
        console.print(tr("  sentence: {words}", words=" ".join(words)))
    console.print(tr("Embed 16, W_q W_k W_v + out, MSE to its own embeddings, Adam 1e-3, 200 epochs."))
    results = []
    for mask_padding in (False, True):
        label = tr("<PAD> masked as a key") if mask_padding else tr("as the tutorial: <PAD> attended like a word")
        console.print(f"[bold]{label}")
        results.append(train_toy(mask_padding, seed=demo.seed,
                                 log=lambda e, v: console.print(tr("  epoch {e:>3}  loss {v:.6f}", e=e, v=v))))
    pad = SENTENCES[1].index("<PAD>")
    plain, masked = (r.weights[1, :, pad].tolist() for r in results)
    console.print(tr("Weight on the <PAD> key, per query of sentence 2: attended {plain}; masked {masked}",
                     plain=", ".join(f"{w:.3f}" for w in plain), masked=", ".join(f"{w:.3f}" for w in masked)))
    paths = save_toy_heatmaps(results, demo.out_dir / "toy")
    console.print(tr("Heatmaps: {paths}", paths=", ".join(str(p) for p in paths)))
