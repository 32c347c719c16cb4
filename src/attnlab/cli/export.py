"""``attnlab export --checkpoint DIR --out model.safetensors``: any checkpoint, sharded or not, as one file."""

from __future__ import annotations

import click

from attnlab.cli.lang import Command
from attnlab.i18n import N_, tr

EXAMPLES = "\n".join([
    "\b", N_("Examples:"),
    "  attnlab export --checkpoint out/fsdp --out model.safetensors",
    '  attnlab sample --checkpoint model.safetensors "ROMEO:"',
])


@click.command(name="export", cls=Command,
               help=N_("Write a checkpoint (also one written in pieces by several processes) as one safetensors "
                       "file that sample, heatmap and view read."),
               epilog=EXAMPLES)
@click.option("--checkpoint", required=True, type=click.Path(exists=True, file_okay=False),
              help=N_("An output directory of `attnlab train` or `train-seq2seq` (or one checkpoint directory in it)."))
@click.option("--out", required=True, type=click.Path(dir_okay=False),
              help=N_("The safetensors file to write (replaced whole, never half-written)."))
def command(checkpoint: str, out: str) -> None:
    from attnlab.training.distributed_checkpoint import export

    if not out.endswith(".safetensors"):  # what sample, translate and --model read a file as
        raise click.UsageError(tr("output file must end in .safetensors, got {out!r}", out=out))
    path = export(checkpoint, out)
    click.echo(tr("wrote {path}", path=str(path)))
