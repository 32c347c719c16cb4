"""``attnlab kernels``: build attnlab's C++ CPU kernels ahead of time, or say whether they are in use.

Nothing else ever compiles them: decoding answers at once on torch's kernels where they are not built, and says so.
"""

from __future__ import annotations

import click

from attnlab.cli.lang import Command
from attnlab.i18n import N_, tr


@click.command(name="kernels", cls=Command,
               help=N_("Build attnlab's CPU kernels (int8 and few-row fp32 products for decoding) ahead of time, "
                       "or with --status say whether they are built and in use."))
@click.option("--status", "status_only", is_flag=True, help=N_("Say where they are and whether they are in use; "
                                                               "build nothing."))
def command(status_only: bool) -> None:
    from attnlab.fast import kernels

    path = kernels.library_path()
    if status_only:
        click.echo(tr("library: {path} ({state})", path=path, state=tr("built") if path.is_file() else
                      tr("not built")))
        click.echo(tr("in use: {status}", status=kernels.status()))
        return
    if path.is_file():
        click.echo(tr("attnlab's CPU kernels are built already: {path}", path=path))
        return
    click.echo(tr("building attnlab's CPU kernels (about a minute, once for this machine and torch) ..."), err=True)
    try:
        built = kernels.build()
    except RuntimeError as err:
        raise click.ClickException(tr("the CPU kernels could not be built: {why}; attnlab runs on torch's kernels "
                                      "instead (the same numbers, more slowly)", why=err)) from None
    click.echo(tr("built: {path}", path=built))
