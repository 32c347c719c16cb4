"""``attnlab cache-size``: how big each real model's cache is, per token and at a length."""

from __future__ import annotations

import click

from attnlab.cli.lang import Command
from attnlab.i18n import N_, _, tr
from attnlab.models.config import DTYPES


@click.command(name="cache-size", cls=Command,
               help=N_("How big the cache is: bytes per token and at a length for real models' configs (MHA, GQA, "
                       "windows, latent, sparse and linear attention), computed from the configs."))
@click.option("--tokens", default=32768, show_default=True, type=click.IntRange(min=1),
              help=N_("The length of the sequence."))
@click.option("--dtype", default="bf16", show_default=True, type=click.Choice(list(DTYPES)),
              help=N_("The dtype of the keys and values (a linear-attention state is float32 in every one)."))
@click.option("--plot", default=None, help=N_("Also draw the cache against the length to this file (.png or .svg)."))
def command(tokens: int, dtype: str, plot: str | None) -> None:
    from rich.console import Console

    from attnlab.inspect.cache_size import HEADERS, shown_bytes, table_rows
    from attnlab.terminal import titled_table

    if plot is not None:
        from attnlab.viz.figures import image_format

        try:
            image_format(plot)
        except ValueError as err:
            raise click.UsageError(str(err)) from err
    table = titled_table(tr("Cache for one sequence of {tokens:,} tokens, {dtype}", tokens=tokens, dtype=dtype))
    for i, header in enumerate(HEADERS):
        table.add_column(_(header).format(tokens=tokens), justify="left" if i < 2 else "right")
    for label, mechanism, per_token, fixed, total in table_rows(tokens, DTYPES[dtype]):
        table.add_row(label, _(mechanism), shown_bytes(per_token), shown_bytes(fixed), shown_bytes(total))
    Console().print(table)
    if plot is not None:
        from attnlab.viz.cache_size_figure import cache_size_figure
        from attnlab.viz.figures import save_figure

        click.echo(tr("wrote {path}", path=save_figure(cache_size_figure(max(tokens, 2), DTYPES[dtype]), plot)))
