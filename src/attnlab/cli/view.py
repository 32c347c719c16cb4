"""``attnlab view TEXT -o attention.html``: an interactive viewer in one self-contained HTML file."""

from __future__ import annotations

import click


@click.command(name="view")
@click.argument("text")
@click.option("-o", "--output", default="attention.html", show_default=True, help="Output HTML file.")
@click.option("--model", "model_name", default="random", show_default=True,
              help="random, bert, or a trained checkpoint directory.")
@click.option("--mechanism", type=click.Choice(["simple", "scaled", "causal", "multihead"]), default="multihead",
              show_default=True, help="Mechanism of the random model.")
@click.option("--seed", default=123, show_default=True, help="Seed of the random model.")
@click.option("--embed-font/--no-embed-font", default=True, show_default=True,
              help="Embed a subset of the CJK font, so CJK tokens render on any machine.")
def command(text: str, output: str, model_name: str, mechanism: str, seed: int, embed_font: bool) -> None:
    """Write TEXT's attention as one HTML file: head view, matrix, all heads, PNG/SVG export. Works offline."""
    from attnlab.inspect import capture
    from attnlab.inspect.models import load_model
    from attnlab.viz.viewer import write_html

    if not output.lower().endswith((".html", ".htm")):
        raise click.UsageError(f"output file must end in .html, got {output!r}")
    try:
        model, tokenizer = load_model(model_name, mechanism=mechanism, seed=seed)
        cap = capture(model, text, tokenizer=tokenizer, qkv=False)
    except (ValueError, TypeError) as err:
        raise click.UsageError(str(err)) from err
    click.echo(f"wrote {write_html(cap, output, embed_font=embed_font)}")
