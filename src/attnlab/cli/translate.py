"""``attnlab translate --checkpoint DIR TEXT...``: one translation per line, greedy or beam search."""

from __future__ import annotations

from pathlib import Path

import click

from attnlab.cli.lang import Command
from attnlab.cli.params import refuse_unused
from attnlab.i18n import N_, tr


def load_translator(checkpoint: str, device: str = "cpu"):
    """``(model, vocab)`` of a ``train-seq2seq`` checkpoint; any other checkpoint is a one-line error."""
    from attnlab.inspect.names import TRANSLATION
    from attnlab.models import load_trained
    from attnlab.training.distributed import pick_device

    model, vocab = load_trained(Path(checkpoint), str(pick_device(device)), kind="seq2seq")
    model.name = TRANSLATION.format(name=Path(checkpoint).name)
    return model, vocab


EXAMPLES = "\n".join([
    "\b", N_("Examples:"),
    '  attnlab translate --checkpoint out/dates "Friday, March 5, 2021" "5 mars 2021" "2021年3月5日"',
    "  attnlab translate --checkpoint out/numbers 1005 20000001 --beam 4",
    '  attnlab translate --checkpoint out/dates "5. März 2021" --heatmap alignment.png',
])


@click.command(name="translate", cls=Command,
               help=N_("Translate each TEXT with a trained encoder-decoder; print one translation per line."),
               epilog=EXAMPLES)
@click.option("--checkpoint", required=True, type=click.Path(exists=True),
              help=N_("An output directory of `attnlab train-seq2seq` (or one checkpoint directory in it), or the file "
                      "of `attnlab export`."))
@click.argument("texts", nargs=-1, required=True)
@click.option("--beam", default=1, show_default=True, type=int, help=N_("Beam width; 1 = greedy decoding."))
@click.option("--alpha", default=0.6, show_default=True, type=float,
              help=N_("Beam search's length penalty ((5 + length) / 6) ** alpha; the paper: 0.6."))
@click.option("--truncate", is_flag=True, help=N_("Cut a source longer than the model's context instead of refusing "
                                                  "it."))
@click.option("--heatmap", type=click.Path(dir_okay=False),
              help=N_("Also draw the cross-attention of the first TEXT (target rows, source columns): .png or .svg."))
@click.option("--layer", type=int, default=None, help=N_("--heatmap: the decoder layer.  [default: the last]"))
@click.option("--head", type=int, default=None, help=N_("--heatmap: one head.  [default: the mean of the heads]"))
@click.option("--device", default="cpu", show_default=True)
def command(checkpoint: str, texts: tuple[str, ...], beam: int, alpha: float, truncate: bool, heatmap: str | None,
            layer: int | None, head: int | None, device: str) -> None:
    from attnlab.generation.translation import translate

    ctx = click.get_current_context()
    if beam == 1:
        refuse_unused(ctx, ["alpha"], tr("with --beam 1 (greedy decoding ranks no beams)"))
    if heatmap is None:
        refuse_unused(ctx, ["layer", "head"], tr("without --heatmap FILE"))
    else:
        from attnlab.viz.figures import image_format

        image_format(heatmap)  # a wrong suffix fails before any work
    model, vocab = load_translator(checkpoint, device)
    results = translate(model, vocab, list(texts), beam=beam, alpha=alpha, truncate=truncate)
    figure = None
    if heatmap is not None:  # drawn before anything is printed: a layer or head out of range prints nothing
        from attnlab.inspect.encoder_decoder import capture_translation
        from attnlab.viz.alignment import alignment_figure

        first = results[0]
        source = first.source[: model.config.context_length]  # what the model read (--truncate cuts it)
        cap = capture_translation(model, vocab, source, first.ids, name=model.name)
        figure = alignment_figure(cap, layer, head)
    written = None
    if figure is not None:  # written before anything is printed: a file that cannot be written prints nothing
        from attnlab.viz.figures import save_figure

        assert heatmap is not None  # the figure is drawn for --heatmap only
        written = save_figure(figure, heatmap)
    for result in results:
        click.echo(result.target)
    if written is not None:
        click.echo(tr("wrote {path}", path=written), err=True)
