"""``attnlab sample``: text from a trained checkpoint or a Hugging Face model directory, streamed as it comes."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from attnlab.cli.lang import Command
from attnlab.cli.params import SEED, refuse_unused
from attnlab.i18n import N_, tr
from attnlab.models.config import DTYPES
from attnlab.models.quantize import SCHEMES, quantize


@click.command(name="sample", cls=Command,
               help=N_("Continue PROMPT (default: a newline) with a trained or pretrained model; KV cache on. "
                       "Several PROMPTs are decoded together as one batch, each as it would be alone."))
@click.option("--checkpoint", "checkpoint", type=click.Path(exists=True),
              help=N_("An output directory of `attnlab train` (or one checkpoint directory in it), or the file of "
                      "`attnlab export`."))
@click.option("--model", "model_dir", type=click.Path(exists=True, file_okay=False),
              help=N_("A Hugging Face model directory (GPT-2, Llama, Qwen2, Mistral, Qwen3, Gemma 2 and 3, Phi-3: "
                      "config.json, model.safetensors, tokenizer.json), or an output directory of `attnlab train`."))
@click.argument("prompts", nargs=-1)
@click.option("--max-new-tokens", default=500, show_default=True, type=click.IntRange(min=0))
@click.option("--temperature", default=0.8, show_default=True, type=float, help=N_("0 = greedy (argmax)."))
@click.option("--top-k", type=int, default=None, help=N_("Sample only from the k most likely tokens."))
@click.option("--top-p", type=float, default=None, help=N_("Sample only from the smallest set with this much "
                                                           "probability."))
@click.option("--seed", type=SEED, default=None, help=N_("Seed, for a repeatable sample."))
@click.option("--device", default="cpu", show_default=True)
@click.option("--dtype", type=click.Choice(list(DTYPES)), default="fp32", show_default=True,
              help=N_("Cast the weights to this dtype (a checkpoint of any training dtype loads; fp16: CUDA only)."))
@click.option("--compile", "compile_", is_flag=True,
              help=N_("Static KV cache and a compiled decoding step (CUDA graphs on a GPU); the same tokens."))
@click.option("--quantize", "scheme", type=click.Choice(list(SCHEMES)), default=None,
              help=N_("Weight-only quantization of the linear maps: fewer bytes to read per token "
                      "(docs/decoding.md)."))
@click.option("--int8-cache", is_flag=True,
              help=N_("Keep the KV cache in int8: about half the memory of bf16, for long contexts."))
@click.option("--sink-tokens", type=click.IntRange(min=0), default=None,
              help=N_("StreamingLLM's cache: keep the first N positions and a --sliding-window of the latest, for "
                      "an endless stream in bounded memory (rotary models; docs/modern.md)."))
@click.option("--sliding-window", type=click.IntRange(min=1), default=None,
              help=N_("The latest positions a --sink-tokens cache keeps, the new one included."))
@click.option("--plain", is_flag=True,
              help=N_("Run the book's plain modules, not their fast twins (the same tokens, more slowly)."))
def command(checkpoint: str | None, model_dir: str | None, prompts: tuple[str, ...], max_new_tokens: int,
            temperature: float, top_k: int | None, top_p: float | None, seed: int | None, device: str, dtype: str,
            compile_: bool, scheme: str | None, int8_cache: bool, sink_tokens: int | None,
            sliding_window: int | None, plain: bool) -> None:
    from attnlab.cli.model_options import load_directory
    from attnlab.generation import GenerationConfig, generate_texts, stream_text

    if temperature == 0:
        refuse_unused(click.get_current_context(), ["seed", "top_k", "top_p"],
                      tr("with --temperature 0 (greedy decoding draws nothing)"))
    if (checkpoint is None) == (model_dir is None):
        raise click.UsageError(tr("give the model as --checkpoint OUT (attnlab train) or --model DIR (a Hugging Face "
                                  "model directory), exactly one of them"))
    try:
        given = checkpoint or model_dir
        assert given is not None  # exactly one of them (checked above)
        model, tokenizer = load_directory(Path(given), device)
        if dtype == "fp16" and next(model.parameters()).device.type == "cpu":
            raise ValueError(tr("--dtype fp16 needs a CUDA device (torch's CPU float16 kernels are emulated on most "
                                "CPUs, many times slower), got --device {device}; on the CPU use bf16 or fp32",
                                device=device))
        model = model.to(DTYPES[dtype])  # checkpoints hold fp32 weights, whatever dtype trained them
        if scheme is not None:
            model = quantize(model.eval(), scheme)
        if not plain:
            announce_kernels(model, scheme)
        config = GenerationConfig(temperature=temperature, top_k=top_k, top_p=top_p, seed=seed, compile=compile_,
                                  accelerate=not plain)
        if len(prompts) > 1:
            if compile_:
                raise ValueError(tr("--compile decodes one prompt; several prompts (a padded batch) need no "
                                    "--compile"))
            if int8_cache:
                raise ValueError(tr("--int8-cache decodes one prompt; several prompts (a padded batch) need no "
                                    "--int8-cache"))
            if sink_tokens is not None:
                raise ValueError(tr("--sink-tokens decodes one prompt; several prompts (a padded batch) need no "
                                    "--sink-tokens"))
            for text in noted(generate_texts, model, tokenizer, list(prompts), max_new_tokens, config):
                click.echo(text)
            return
        prompt = prompts[0] if prompts else "\n"
        cache = cache_for(model, int8_cache, sink_tokens, sliding_window, compile_)
        pieces = noted(stream_text, model, tokenizer, prompt, max_new_tokens, config, cache)  # checks
        click.echo(prompt, nl=False)
        for piece in pieces:
            click.echo(piece, nl=False)
        click.echo()
    except (ValueError, TypeError, FileNotFoundError) as err:
        raise click.ClickException(str(err)) from None


def noted(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, each PositionTableWarning it raises told on stderr as one line."""
    from attnlab.generation import PositionTableWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PositionTableWarning)
        result = fn(*args, **kwargs)
    for w in caught:
        if issubclass(w.category, PositionTableWarning):
            click.echo(tr("note: {text}", text=w.message), err=True)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return result


def cache_for(model: Any, int8_cache: bool, sink_tokens: int | None, sliding_window: int | None,
              compile_: bool) -> Any:
    """The cache the options ask for (None: ``generate``'s own, the dynamic one or the compiled loop's static one)."""
    from attnlab.models import KVCache, SinkKVCache

    if sliding_window is not None and sink_tokens is None:
        raise ValueError(tr("--sliding-window {sliding_window} is the window of a sink cache; give --sink-tokens "
                            "with it (0: the window alone)", sliding_window=sliding_window))
    chosen = [name for name, on in (("--int8-cache", int8_cache), ("--sink-tokens", sink_tokens is not None),
                                    ("--compile", compile_)) if on]
    if len(chosen) > 1:
        raise ValueError(tr("{options}: each decodes with a cache of its own (int8 rows, a sink and a window, a "
                            "static cache for the compiled loop); give one of them", options=", ".join(chosen)))
    if int8_cache:
        return KVCache.for_model(model, 1, storage="int8")
    if sink_tokens is not None:
        return SinkKVCache.for_model(model, 1, sink_tokens=sink_tokens, sliding_window=sliding_window)
    return None


def announce_kernels(model: Any, scheme: str | None) -> None:
    """Decoding on a CPU runs attnlab's C++ kernels where they are built; where they are not, say so once, and how
    to build them (never a build here: a sample starts at once)."""
    from attnlab.fast import kernels

    if next(model.parameters()).device.type == "cpu" and not kernels.load():
        click.echo(tr("note: {what} products run on {status}", what=scheme or "fp32", status=kernels.status()),
                   err=True)
