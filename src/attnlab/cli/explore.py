"""``attnlab explore``: a local server and its page, where every layer × head of a model answers as you type."""

from __future__ import annotations

import sys
import threading

import click

from attnlab.cli.lang import Command
from attnlab.cli.params import refuse_unused
from attnlab.i18n import N_, language, tr

EXAMPLES = "\n".join([
    "\b", N_("Examples:"),
    "  attnlab explore --checkpoint out/shakespeare",
    "  attnlab explore --checkpoint out/shakespeare --checkpoint out/dates --model bert",
    "  attnlab explore --model-dir path/to/Qwen2.5-0.5B --no-browser --port 8800",
    '  attnlab explore --checkpoint out/dates --text "15 juillet 2031" --export snapshot',
])


@click.command(name="explore", cls=Command, epilog=EXAMPLES,
               help=N_("Explore attention in the browser: type a text and see every layer and head, one head step by "
                       "step, the next token under temperature, top-k and top-p, generation with its cache, heads "
                       "switched off. A local server, one person, offline; it prints its URL with a token."))
@click.option("--checkpoint", "checkpoints", multiple=True, type=click.Path(exists=True),
              help=N_("An output directory of `attnlab train` or `attnlab train-seq2seq` (or the file of `attnlab "
                      "export`); repeat for several models."))
@click.option("--model-dir", "model_dirs", multiple=True, type=click.Path(exists=True, file_okay=False),
              help=N_("A Hugging Face model directory (config.json, model.safetensors, tokenizer.json); repeatable."))
@click.option("--model", "shipped", multiple=True, type=click.Choice(["bert", "minilm"]),
              help=N_("A model that ships with attnlab: bert (all-MiniLM-L6-v2, an encoder); the default when no "
                      "model is given."))
@click.option("--text", default=None, help=N_("The text the page starts with.  [default: one per kind of model]"))
@click.option("--host", default="127.0.0.1", show_default=True,
              help=N_("The address to serve; 0.0.0.0 lets every machine that can reach this one use it."))
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535),
              help=N_("The port; 0 takes any free one."))
@click.option("--no-browser", is_flag=True, help=N_("Print the URL only; do not open a browser."))
@click.option("--export", "export_dir", type=click.Path(file_okay=False),
              help=N_("Write a self-contained snapshot of --text (index.html, no server) into this directory and "
                      "exit."))
def command(checkpoints: tuple[str, ...], model_dirs: tuple[str, ...], shipped: tuple[str, ...], text: str | None,
            host: str, port: int, no_browser: bool, export_dir: str | None) -> None:
    from attnlab.explore.api import Api
    from attnlab.explore.entry import load_entries

    ctx = click.get_current_context()
    if export_dir is not None:
        refuse_unused(ctx, ["host", "port", "no_browser"], tr("with --export, which starts no server"))
    if text is not None and not text.strip():
        raise click.BadParameter(tr("expected some text, got only spaces"), ctx=ctx, param_hint="'--text'")
    if not (checkpoints or model_dirs or shipped):
        shipped = ("bert",)
    entries = load_entries(checkpoints, model_dirs, shipped, text)  # every model, before anything is served
    api = Api(entries)
    if export_dir is not None:
        from attnlab.explore.snapshot import write_snapshot

        click.echo(tr("wrote {path}", path=write_snapshot(api, export_dir, text, language())))
        return
    serve_explorer(api, host, port, not no_browser)


def serve_explorer(api, host: str, port: int, open_browser: bool) -> None:
    """Bind, say where, serve until Ctrl-C."""
    from attnlab.explore.launch import bind, page_maker, serve, url_of
    from attnlab.explore.server import Hosts, create_app, new_token

    if host in ("0.0.0.0", "::", ""):
        click.echo(tr("warning: --host {host} serves the explorer to every machine that can reach this one; anyone "
                      "who has the URL with its token can use it", host=host or "0.0.0.0"), err=True)
    sock = bind(host, port)
    token = new_token()
    url = url_of(sock, host, token)
    app = create_app(api, token, Hosts.serving(host, sock.getsockname()[1]), page_maker(api, language(), token),
                     language())

    def ready() -> None:
        click.echo(tr("attnlab explore: {n} model(s) ({names}) at {url}", n=len(api.entries),
                      names=", ".join(api.entries), url=url))
        click.echo(tr("Ctrl-C stops it."))
        sys.stdout.flush()
        if open_browser:
            import webbrowser

            threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()

    serve(app, sock, ready)
