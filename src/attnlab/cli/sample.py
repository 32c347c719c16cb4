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
def command(checkpoint: str | None, model_dir: str | None, prompts: tuple[str, ...], max_new_tokens: int,
            temperature: float, top_k: int | None, top_p: float | None, seed: int | None, device: str, dtype: str,
            compile_: bool, scheme: str | None, int8_cache: bool, sink_tokens: int | None,
            sliding_window: int | None) -> None:
    from attnlab.cli.model_options import load_directory
    from attnlab.generation import generate_texts, stream_text

    if temperature == 0:
        refuse_unused(click.get_current_context(), ["seed", "top_k", "top_p"],
                      tr("with --temperature 0 (greedy decoding draws nothing)"))
    if (checkpoint is None) == (model_dir is None):
        raise click.UsageError(tr("give the model as --checkpoint OUT (attnlab train) or --model DIR (a Hugging Face "
                                  "model directory), exactly one of them"))
    try:
        model, tokenizer = load_directory(Path(checkpoint or model_dir), device)
        if dtype == "fp16" and next(model.parameters()).device.type == "cpu":
            raise ValueError(tr("--dtype fp16 needs a CUDA device (torch's CPU float16 kernels are emulated on most "
                                "CPUs, many times slower), got --device {device}; on the CPU use bf16 or fp32",
                                device=device))
        model = model.to(DTYPES[dtype])  # checkpoints hold fp32 weights, whatever dtype trained them
        if scheme is not None:
            model = quantized(model, scheme)
        else:
            announce_fp32_kernel(model, len(prompts))
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
            for text in noted(generate_texts, model, tokenizer, list(prompts), max_new_tokens, temperature, top_k,
                              top_p, seed):
                click.echo(text)
            return
        prompt = prompts[0] if prompts else "\n"
        pieces = noted(stream_text, model, tokenizer, prompt, max_new_tokens, temperature, top_k, top_p, seed,
                       compile=compile_, int8_cache=int8_cache, sink_tokens=sink_tokens,
                       sliding_window=sliding_window)  # checks
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


def announce_fp32_kernel(model: Any, rows: int) -> None:
    """fp32 decoding on a CPU runs attnlab's kernel, built by ``generate`` the first time: say so before the wait."""
    from attnlab.functional import kernels
    from attnlab.generation.decode import decodes_on_cpu_kernels

    if decodes_on_cpu_kernels(model, rows) and kernels.cpu_kernels_to_build():
        click.echo(tr("note: building attnlab's CPU kernels, once for this machine (about a minute)"), err=True)


def quantized(model: Any, scheme: str) -> Any:
    """``quantize(model, scheme)``, saying what a user waits for or gets: the int8 kernel's one-time build, or
    torch's slower kernels where it cannot be built."""
    from attnlab.functional import kernels

    on_cpu = next(model.parameters()).device.type == "cpu"
    if on_cpu and scheme == "int8" and kernels.cpu_kernels_to_build():
        click.echo(tr("note: building attnlab's int8 CPU kernel, once for this machine (about a minute)"), err=True)
    model = quantize(model.eval(), scheme)
    if on_cpu and scheme == "int8" and not kernels.cpu_kernels_ready():
        click.echo(tr("note: int8 products run on {status}", status=kernels.cpu_kernels_status()), err=True)
    return model

