"""The induction experiment's pictures: its training curves with the phase change marked, and an induction head's
attention on a repeated sequence (the stripe one token to the right of the diagonal of the earlier occurrences)."""

from __future__ import annotations

from typing import Any

from matplotlib.figure import Figure
from torch import Tensor

from attnlab.heads.induction import shown_model
from attnlab.i18n import tr
from attnlab.viz.fonts import drawn_in_every_script, setup_fonts
from attnlab.viz.heatmap import draw_weights

COLOURS = {"1-layer": "tab:blue", "2-layer": "tab:red"}


@drawn_in_every_script
def induction_training_figure(result: dict[str, Any]) -> Figure:
    """Loss (training data and repeated half), best prefix-matching score and in-context learning score against the
    step, for each model of ``result`` (what ``induction.json`` holds); the two-layer model's phase change marked."""
    fig = Figure(figsize=(8, 9), layout="constrained")
    loss_ax, score_ax, icl_ax = fig.subplots(3, 1, sharex=True)
    threshold = result["config"]["induction_threshold"]
    for name, model in result["models"].items():
        history, colour, shown = model["history"], COLOURS.get(name), shown_model(name)
        steps = [e["step"] for e in history]
        loss_ax.plot(steps, [e["loss"] for e in history], "-", color=colour,
                     label=tr("{name}: training data", name=shown))
        loss_ax.plot(steps, [e["repeated_loss"] for e in history], "--", color=colour,
                     label=tr("{name}: repeated half", name=shown))
        score_ax.plot(steps, [max(max(row) for row in e["prefix_matching"]) for e in history], "o-", ms=3,
                      color=colour, label=tr("{name}: best head", name=shown))
        icl_ax.plot(steps, [e["icl_score"] for e in history], "o-", ms=3, color=colour, label=shown)
        if model["phase_change_step"] is not None:
            for ax in (loss_ax, score_ax, icl_ax):
                ax.axvline(model["phase_change_step"], color=colour, ls=":", lw=1)
            score_ax.annotate(tr("phase change ({name}, step {step})", name=shown, step=model["phase_change_step"]),
                              (model["phase_change_step"], threshold), textcoords="offset points", xytext=(6, -14),
                              fontsize=8, color=colour)
    score_ax.axhline(threshold, color="grey", lw=0.8, ls="--")
    loss_ax.set_ylabel(tr("cross-entropy (nats)"))
    score_ax.set_ylabel(tr("prefix-matching score"))
    score_ax.set_ylim(0, 1)
    early, late = result["config"]["icl_positions"]
    icl_ax.set_ylabel(tr("ICL score\n(loss at token {late} − token {early})", late=late + 1, early=early + 1))
    icl_ax.set_xlabel(tr("training step"))
    for ax in (loss_ax, score_ax, icl_ax):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(tr("induction heads form in a phase change (two layers), never in one layer"))
    return fig


@drawn_in_every_script
def induction_head_figure(weights: Tensor, tokens: list[str], layer: int, head: int, score: float) -> Figure:
    """One head's ``(T, T)`` weights on a sequence whose second half repeats the first."""
    t = len(tokens)
    fig = Figure(figsize=(7.5, 6.5), layout="constrained")
    ax = fig.add_subplot()
    image = draw_weights(ax, weights, tokens, setup_fonts(), annotate=False, labels=t <= 40)
    ax.tick_params(labelsize=6)
    ax.set_title(tr("layer {layer}, head {head}: prefix-matching score {score:.2f}\n(second-half tokens attend to the "
                    "token after their earlier occurrence)", layer=layer, head=head, score=score), fontsize=10)
    fig.colorbar(image, ax=ax, label=tr("attention weight"), shrink=0.8)
    return fig
