"""``attnlab heatmap TEXT -o out.png``: attention weights as a heatmap, one head or all heads of a layer."""

from __future__ import annotations

import click

from attnlab.cli.lang import Command
from attnlab.cli.model_options import capture_text, model_options
from attnlab.cli.params import refuse_unused
from attnlab.i18n import N_, tr


@click.command(name="heatmap", cls=Command,
               help=N_("Draw the attention weights of TEXT: query rows, key columns, tokens on both axes."))
@click.argument("text")
@click.option("-o", "--output", default="attention.png", show_default=True, help=N_("Output file (.png or .svg)."))
@model_options(default_mechanism="multihead")
@click.option("--layer", default=0, show_default=True, help=N_("Layer to draw."))
@click.option("--head", default=0, show_default=True, help=N_("Head to draw."))
@click.option("--all-heads", is_flag=True, help=N_("Draw every head of the layer in a grid."))
@click.option("--annotate/--no-annotate", default=None,
              help=N_("Write the weights in the cells (default: when they fit at a legible size)."))
def command(text: str, output: str, model_name: str, mechanism: str, layer: int, head: int, all_heads: bool,
            annotate: bool | None, seed: int) -> None:
    from attnlab.viz.figures import image_format, save_figure
    from attnlab.viz.heatmap import head_figure, heads_figure

    try:
        image_format(output)
    except ValueError as err:
        raise click.UsageError(str(err)) from err
    if all_heads:
        refuse_unused(click.get_current_context(), ["head"], tr("with --all-heads, which draws every head"))
    cap = capture_text(text, model_name, mechanism, seed, qkv=False)
    try:
        cap.check_layer_head(layer, None if all_heads else head)
        fig = heads_figure(cap, layer, annotate=annotate) if all_heads else head_figure(cap, layer, head, annotate)
    except (ValueError, TypeError, ImportError) as err:
        raise click.UsageError(str(err)) from err
    click.echo(tr("wrote {path}", path=save_figure(fig, output)))
