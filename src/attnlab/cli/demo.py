"""``attnlab demo``: the four mechanisms on the book's six-token sentence, every number printed."""

from __future__ import annotations

import click

from attnlab.demo import run_demo


@click.command(name="demo")
@click.option("--seed", default=123, show_default=True, help="Seed for the trainable weights.")
@click.option("--out", "out_dir", default="out", show_default=True, type=click.Path(file_okay=False),
              help="Where later steps write their files.")
def command(seed: int, out_dir: str) -> None:
    """Walk through attention: simplified, scaled, causal and multi-head, step by step."""
    run_demo(seed=seed, out_dir=out_dir)
