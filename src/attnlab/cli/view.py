"""``attnlab view TEXT -o attention.html``: an interactive viewer in one self-contained HTML file."""

from __future__ import annotations

import click

from attnlab.cli.lang import Command
from attnlab.cli.model_options import capture_text, model_options
from attnlab.cli.params import refuse_unused
from attnlab.i18n import N_, tr


@click.command(name="view", cls=Command,
               help=N_("Write TEXT's attention as one HTML file: head view, matrix, all heads, PNG/SVG export. Works "
                       "offline."))
@click.argument("text")
@click.option("-o", "--output", default="attention.html", show_default=True, help=N_("Output HTML file."))
@model_options(default_mechanism="multihead")
@click.option("--embed-font/--no-embed-font", default=True, show_default=True,
              help=N_("Embed a subset of the CJK font, so CJK tokens render on any machine."))
@click.option("--checkpoint", type=click.Path(exists=True, file_okay=False),
              help=N_("A train-seq2seq checkpoint: TEXT is a source; the page shows the encoder's self-attention, "
                      "the decoder's and the cross-attention while the model translates it."))
@click.option("--mode", type=click.Choice(["encoder", "decoder", "cross"]), default="cross", show_default=True,
              help=N_("With --checkpoint: the attention shown first (the page switches between all three)."))
def command(text: str, output: str, model_name: str, mechanism: str, seed: int, embed_font: bool,
            checkpoint: str | None, mode: str) -> None:
    from attnlab.viz.viewer import write_html

    if not output.lower().endswith((".html", ".htm")):
        raise click.UsageError(tr("output file must end in .html, got {output!r}", output=output))
    ctx = click.get_current_context()
    if checkpoint is None:
        refuse_unused(ctx, ["mode"], tr("without --checkpoint"))
    else:
        refuse_unused(ctx, ["model_name", "mechanism", "seed"], tr("with --checkpoint, whose model is shown"))
    if checkpoint is not None:
        from attnlab.cli.translate import load_translator
        from attnlab.generation.translation import translate
        from attnlab.inspect.encoder_decoder import capture_translation

        model, vocab = load_translator(checkpoint)
        written = translate(model, vocab, [text])[0]
        cap = capture_translation(model, vocab, text, written.ids, name=model.name)
        title = f"{text} → {written.target}"
        click.echo(tr("wrote {path}", path=write_html(cap, output, title=title, embed_font=embed_font, mode=mode)))
        return
    cap = capture_text(text, model_name, mechanism, seed, qkv=False)
    click.echo(tr("wrote {path}", path=write_html(cap, output, embed_font=embed_font)))
