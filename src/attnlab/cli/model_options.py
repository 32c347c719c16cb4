"""What ``explain``, ``heatmap`` and ``view`` share: which model to look through, and its capture."""

from __future__ import annotations

from collections.abc import Callable

import click

MECHANISMS = ["simple", "scaled", "causal", "multihead"]


def model_options(default_mechanism: str) -> Callable:
    """``--model``, ``--mechanism`` and ``--seed``, as one decorator."""

    def decorate(fn: Callable) -> Callable:
        fn = click.option("--seed", default=123, show_default=True, help="Seed of the random model.")(fn)
        fn = click.option("--mechanism", type=click.Choice(MECHANISMS), default=default_mechanism,
                          show_default=True, help="Mechanism of the random model.")(fn)
        return click.option("--model", "model_name", default="random", show_default=True,
                            help="random, bert, or a trained checkpoint directory.")(fn)

    return decorate


def capture_text(text: str, model_name: str, mechanism: str, seed: int, qkv: bool = True):
    """Load the model and capture its forward pass on ``text``; bad input becomes a click usage error."""
    from attnlab.inspect import capture
    from attnlab.inspect.models import load_model

    try:
        model, tokenizer = load_model(model_name, mechanism=mechanism, seed=seed)
        return capture(model, text, tokenizer=tokenizer, qkv=qkv)
    except (ValueError, TypeError, ImportError) as err:
        raise click.UsageError(str(err)) from err
