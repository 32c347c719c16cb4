"""``attnlab pe-plot``: draw the sinusoidal positional encoding."""

from __future__ import annotations

import click

from attnlab.cli.lang import Command
from attnlab.i18n import N_, tr


def parse_dims(dims: str) -> list[int]:
    try:
        return [int(d) for d in dims.split(",") if d.strip()]
    except ValueError:
        raise ValueError(tr("--dims: expected comma-separated integers such as 0,1,10, got {dims!r}",
                            dims=dims)) from None


def even(ctx: click.Context, param: click.Parameter, value: int) -> int:
    """The table pairs sin and cos: checked here, in the reader's language, before the library's English check."""
    if value % 2:
        raise click.BadParameter(tr("must be even (sin/cos pairs), got {value}", value=value))
    return value


@click.command(name="pe-plot", cls=Command,
               help=N_("Plot PE(pos, i) as a positions × dimensions heatmap and a few dimensions as curves."))
@click.option("-o", "--output", default="pe.png", show_default=True, help=N_("Output file (.png or .svg)."))
@click.option("--context-length", default=100, show_default=True, type=click.IntRange(min=1),
              help=N_("Number of positions."))
@click.option("--d-model", default=64, show_default=True, type=click.IntRange(min=2), callback=even,
              help=N_("Embedding width (even)."))
@click.option("--dims", default=None, help=N_("Comma-separated dimensions to draw as curves, e.g. 0,1,10."))
def command(output: str, context_length: int, d_model: int, dims: str | None) -> None:
    from attnlab.memory import check_fits
    from attnlab.viz.figures import image_format, save_figure
    from attnlab.viz.pe_plot import pe_figure

    try:
        image_format(output)
        wanted = None if dims is None else parse_dims(dims)
        check_fits(4 * context_length * d_model, tr("a table of {t:,} × {d:,} float32", t=context_length, d=d_model),
                   "--context-length, --d-model")
        fig = pe_figure(context_length, d_model, wanted)
    except ValueError as err:
        raise click.UsageError(str(err)) from err
    click.echo(tr("wrote {path}", path=save_figure(fig, output)))
