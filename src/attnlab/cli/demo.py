"""``attnlab demo``: the four mechanisms on the book's six-token sentence, every number printed."""

from __future__ import annotations

import click

from attnlab.cli.lang import Command
from attnlab.cli.params import SEED
from attnlab.demo import run_demo
from attnlab.demo.dates import translation_step
from attnlab.demo.toy import toy_step
from attnlab.i18n import N_


@click.command(name="demo", cls=Command,
               help=N_("Walk through attention: simplified, scaled, causal and multi-head, step by step.\n\n"
                       "PART runs one part alone: `toy` is the tutorial's one-layer toy (training, heatmaps); "
                       "`dates` the encoder-decoder that learns to translate dates (a fixed number of training steps, "
                       "translations, an alignment)."))
@click.option("--seed", default=123, show_default=True, type=SEED, help=N_("Seed for the trainable weights."))
@click.option("--out", "out_dir", default="out", show_default=True, type=click.Path(file_okay=False),
              help=N_("Where later steps write their files."))
@click.argument("part", required=False, type=click.Choice(["toy", "dates"]), metavar="[PART]")
def command(seed: int, out_dir: str, part: str | None) -> None:
    run_demo(seed=seed, out_dir=out_dir, steps=None if part is None else [{"toy": toy_step,
                                                                            "dates": translation_step}[part]])
