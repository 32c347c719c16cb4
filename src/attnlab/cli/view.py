"""``attnlab view TEXT -o attention.html``: an interactive viewer in one self-contained HTML file."""

from __future__ import annotations

import click

from attnlab.cli.lang import Command
from attnlab.cli.model_options import capture_text, model_options
from attnlab.i18n import N_, tr


@click.command(name="view", cls=Command,
               help=N_("Write TEXT's attention as one HTML file: head view, matrix, all heads, PNG/SVG export. Works "
                       "offline."))
@click.argument("text")
@click.option("-o", "--output", default="attention.html", show_default=True, help=N_("Output HTML file."))
@model_options(default_mechanism="multihead")
@click.option("--embed-font/--no-embed-font", default=True, show_default=True,
              help=N_("Embed a subset of the CJK font, so CJK tokens render on any machine."))
def command(text: str, output: str, model_name: str, mechanism: str, seed: int, embed_font: bool) -> None:
    from attnlab.viz.viewer import write_html

    if not output.lower().endswith((".html", ".htm")):
        raise click.UsageError(tr("output file must end in .html, got {output!r}", output=output))
    cap = capture_text(text, model_name, mechanism, seed, qkv=False)
    click.echo(tr("wrote {path}", path=write_html(cap, output, embed_font=embed_font)))
