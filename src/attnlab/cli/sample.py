"""``attnlab sample``: text from a trained checkpoint, streamed as it is generated."""

from __future__ import annotations

import click


@click.command(name="sample")
@click.option("--checkpoint", "checkpoint", required=True, type=click.Path(exists=True, file_okay=False),
              help="An output directory of `attnlab train` (or one checkpoint directory in it).")
@click.argument("prompt", default="\n", required=False)
@click.option("--max-new-tokens", default=500, show_default=True, type=click.IntRange(min=0))
@click.option("--temperature", default=0.8, show_default=True, type=float, help="0 = greedy (argmax).")
@click.option("--top-k", type=int, default=None, help="Sample only from the k most likely tokens.")
@click.option("--top-p", type=float, default=None, help="Sample only from the smallest set with this much probability.")
@click.option("--seed", type=int, default=None, help="Seed, for a repeatable sample.")
@click.option("--device", default="cpu", show_default=True)
def command(checkpoint: str, prompt: str, max_new_tokens: int, temperature: float, top_k: int | None,
            top_p: float | None, seed: int | None, device: str) -> None:
    """Continue PROMPT (default: a newline) with a trained model; KV cache on."""
    from attnlab.generation import stream_text
    from attnlab.models import load_trained

    try:
        model, tokenizer = load_trained(checkpoint, device)
        pieces = stream_text(model, tokenizer, prompt, max_new_tokens, temperature, top_k, top_p, seed)  # checks
        click.echo(prompt, nl=False)
        for piece in pieces:
            click.echo(piece, nl=False)
        click.echo()
    except (ValueError, TypeError) as err:
        raise click.ClickException(str(err)) from None
