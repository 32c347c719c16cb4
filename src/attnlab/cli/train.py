"""``attnlab train``: a GPT or a modern decoder on a text corpus, from one command (also under ``torchrun``)."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import click

from attnlab.cli.config_options import FieldOption
from attnlab.cli.lang import Command
from attnlab.cli.params import SEED, check_resume_or_overwrite, refuse_unused
from attnlab.data.tokenizer import TOKENIZERS
from attnlab.i18n import N_, _, tr
from attnlab.models.config import DTYPES
from attnlab.models.registry import ARCHITECTURES
from attnlab.training.config import PARALLEL_MODES, TrainConfig

# shown after the options, line by line as written (click's \b); only the heading is translated
EXAMPLES = "\n".join([
    "\b", N_("Examples:"),
    "  attnlab train --data shakespeare --preset baby --out out/baby",
    "  attnlab train --arch modern --preset baby --out out/modern",
    "  attnlab train --out out/baby --resume --max-iters 4000",
    "  attnlab train --preset gpt2-small --data corpus.txt --tokenizer bpe --dtype bf16",
    "  torchrun --nproc_per_node=2 --no-python attnlab train --preset tiny --grad-accum 2",
    "  torchrun --nproc_per_node=8 --no-python attnlab train --arch modern --preset llama-3.2-1b --parallel fsdp+tp "
    "--tp-size 2 --dtype bf16 --activation-checkpointing",
])


def resumed_config(out: str, kind: str) -> tuple[dict[str, Any], int]:
    """The training config saved in the run at ``out`` (for ``--resume``) and the step its latest checkpoint
    reached; the run must be of ``kind`` (``"decoder"``: ``attnlab train``; ``"seq2seq"``: ``attnlab
    train-seq2seq``)."""
    from pathlib import Path

    from attnlab.models.checkpoint import checkpoint_kind
    from attnlab.training import load_checkpoint

    if not Path(out).is_dir():
        raise ValueError(tr("resume: no checkpoint in {out!r} (expected {out}/checkpoint.json)", out=out))
    found = checkpoint_kind(out)
    if found != kind:
        command = {"decoder": "attnlab train", "seq2seq": "attnlab train-seq2seq"}[found]
        raise ValueError(tr("resume: {out!r} holds a run of {command}; resume it with {command} --out {out} --resume",
                            out=out, command=command))
    checkpoint = load_checkpoint(out)
    checkpoint.check_trainer_state()
    return checkpoint.state["train_config"], checkpoint.step


def identity(values: dict[str, Any]) -> dict[str, str]:
    """What a run is, by the options that set it: its architecture, what it learns from (a corpus, a task or a
    file of pairs), its tokenizer (and a BPE's size); ``{"arch": "--arch gpt", ...}``."""
    import os

    source = ("--task", values["task"]) if values.get("task") else ("--data", values.get("data"))
    found = {"arch": ("--arch", values.get("arch")), "source": source}
    if "tokenizer" in values:
        found["tokenizer"] = ("--tokenizer", values["tokenizer"])
        if values["tokenizer"] == "bpe":
            found["vocab_size"] = ("--vocab-size", values.get("vocab_size"))
    shown = {}
    for key, (option, value) in found.items():
        if option == "--data" and value not in (None, "shakespeare"):
            value = os.path.realpath(value)  # the same file, by whatever path it is given
        shown[key] = f"{option} {value}"
    return shown


def check_resume(config: Any, saved: dict[str, Any], step: int) -> None:
    """On ``--resume``: the architecture, what the run learns from and its tokenizer must be the run's own, and
    ``max_iters`` must leave steps to train. Each refusal names what the run's checkpoint recorded, so that a
    mistake is told by its cause (another model, another corpus), not by a symptom far from it."""
    out = config.out
    recorded, asked = identity(saved), identity(dataclasses.asdict(config))
    for key, was in recorded.items():
        if asked.get(key, was) != was:
            raise ValueError(tr("resume: the run in {out!r} was trained with {saved} (its checkpoint at step {step} "
                                "says so); {asked} would make it another run: leave it out, or train that in a new "
                                "--out", out=out, saved=was, step=step, asked=asked[key]))
    if config.max_iters <= step:
        raise ValueError(tr("resume: the run in {out!r} is at step {step} and max_iters is {max_iters}: no step is "
                            "left to train; give a --max-iters above {step}", out=out, step=step,
                            max_iters=config.max_iters))


def merge_config(given: dict[str, Any], config_file: str | None, resume: bool):
    """Defaults < the checkpoint's config (on resume) < the TOML file < the flags given."""
    from attnlab.training import load_toml

    values, step = resumed_config(given.get("out") or TrainConfig.out, "decoder") if resume else ({}, 0)
    saved = dict(values)
    if config_file:
        from_file = load_toml(config_file)
        TrainConfig.check_values(from_file, tr("config file {path!r}", path=config_file))  # keys, types
        model = {**values.get("model", {}), **from_file.pop("model", {})}
        values = {**values, **from_file, "model": model}
    config = TrainConfig.from_dict(with_flags(values, given, TrainConfig))
    if resume:
        check_resume(config, saved, step)
    return config


def with_flags(values: dict[str, Any], given: dict[str, Any], config: type) -> dict[str, Any]:
    """``values`` with the flags given (None: not given): a field of ``config`` replaces its value, any other flag
    (``--num-layers``, ...) overrides the preset's field in the ``model`` table."""
    fields = {f.name for f in dataclasses.fields(config)}
    given = {k: v for k, v in given.items() if v is not None}
    model = {**values.get("model", {}), **{k: v for k, v in given.items() if k not in fields}}
    return {**values, **{k: v for k, v in given.items() if k in fields}, "model": model}


def draw_loss_curve(trainer) -> None:
    """After every checkpoint: ``OUT/loss.png``, the loss so far (the trainer saves; the CLI draws)."""
    from attnlab.viz.figures import save_figure
    from attnlab.viz.loss_curve import loss_figure

    what = getattr(trainer.config, "source", trainer.config.data)  # a translation run names its task or file
    title = tr("{what}: {count:,} parameters", what=what, count=sum(p.numel() for p in trainer.model.parameters()))
    save_figure(loss_figure(trainer.train_losses, trainer.evals, title), trainer.out / "loss.png", dpi=110)


def _presets() -> dict[str, str]:
    """The presets of each architecture ``--arch`` offers, for ``--preset``'s help."""
    return {"presets": "; ".join(f"{name}: {', '.join(ARCHITECTURES[name].presets)}" for name in TrainConfig.ARCHS)}


def _architectures() -> dict[str, str]:
    return {"architectures": "; ".join(f"{name}, {_(ARCHITECTURES[name].summary)}" for name in TrainConfig.ARCHS)}


option = functools.partial(click.option, cls=FieldOption, config=TrainConfig)  # [default: the TrainConfig field's]


def parallel_options(option: Any) -> Any:
    """``--parallel``, ``--tp-size`` and ``--activation-checkpointing``, as options of ``option``'s config."""
    def decorate(command: Any) -> Any:
        for add in reversed((
            option("--parallel", type=click.Choice(PARALLEL_MODES),
                   help=N_("Under torchrun: ddp (every process holds the whole model), fsdp (weights, gradients and "
                           "AdamW's state sharded), tp (the heads split across the processes) or fsdp+tp (a 2-D "
                           "mesh).")),
            option("--tp-size", type=int,
                   help=N_("Processes that split each block's heads (tp: all of them; fsdp+tp: give it).")),
            option("--activation-checkpointing/--no-activation-checkpointing", "activation_checkpointing",
                   default=None, help=N_("Recompute each block's activations in backward instead of keeping them.")),
        )):
            command = add(command)
        return command
    return decorate


@click.command(name="train", cls=Command,
               help=N_("Train a GPT (or a Llama-style decoder) to predict the next token of a corpus."),
               epilog=EXAMPLES)
@option("--data", help=N_("'shakespeare' (built in), a text file or a directory."))
@option("--out", help=N_("Output directory: checkpoints, tokenizer, loss curve."))
@option("--tokenizer", type=click.Choice(TOKENIZERS), help=N_("Characters or byte-level BPE."))
@option("--vocab-size", type=int, help=N_("BPE vocabulary size."))
@option("--arch", type=click.Choice(TrainConfig.ARCHS), values=_architectures,
        help=N_("The architecture: {architectures}."))
@option("--preset", values=_presets, help=N_("A preset of the architecture's config ({presets})."))
@option("--num-layers", type=int, help=N_("Override the preset: number of blocks."))
@option("--num-heads", type=int, help=N_("Override the preset: attention heads."))
@option("--num-kv-heads", type=int, help=N_("Override the preset: key/value heads (--arch modern)."))
@option("--d-model", type=int, help=N_("Override the preset: model width."))
@option("--d-ff", type=int, help=N_("Override the preset: feed-forward width (default 4·d_model)."))
@option("--context-length", type=int, help=N_("Override the preset: the longest sequence (block size)."))
@option("--dropout", type=float, help=N_("Override the preset: dropout."))
@option("--max-iters", type=int, help=N_("Optimizer steps."))
@option("--batch-size", type=int, help=N_("Sequences per micro-batch, per process."))
@option("--grad-accum", type=int, help=N_("Micro-batches per step, over all processes."))
@option("--lr", "--learning-rate", "learning_rate", type=float, help=N_("Peak learning rate."))
@option("--min-lr", type=float, help=N_("Learning rate at the end of the cosine."))
@option("--warmup-iters", type=int, help=N_("Linear warm-up steps."))
@option("--lr-decay-iters", type=int, help=N_("Cosine length in steps (none given: --max-iters)."))
@option("--weight-decay", type=float, help=N_("AdamW weight decay on matrices."))
@option("--grad-clip", type=float, help=N_("Max gradient norm, 0 = off."))
@option("--eval-interval", type=int, help=N_("Steps between evals and checkpoints."))
@option("--eval-iters", type=int, help=N_("Batches per loss estimate."))
@option("--val-fraction", type=float, help=N_("Share of the corpus held out."))
@option("--seed", type=SEED, help=N_("Seed for weights, batches and dropout."))
@option("--time-budget", type=float,
        help=N_("Train for this many minutes: the first steps are timed, then warm-up and cosine are planned to reach "
                "--min-lr when the time is spent, and re-planned as the speed changes. With --max-iters too, "
                "whichever ends first."))
@option("--compile/--no-compile", "compile", default=None, help=N_("torch.compile the model."))
@option("--fast/--plain", "accelerate", default=None,
        help=N_("Train the modules' fast twins (the default), or the book's plain modules (the same arithmetic, "
                "rounded otherwise, more slowly)."))
@option("--device", help=N_("auto, cpu, cuda, cuda:N."))
@option("--dtype", type=click.Choice(list(DTYPES)),
        help=N_("Mixed precision: autocast's dtype; weights and checkpoints stay fp32 (fp16: CUDA only)."))
@parallel_options(option)
@option("--config", "config_file", type=click.Path(dir_okay=False), help=N_("A TOML file of these settings."))
@option("--resume", is_flag=True, help=N_("Continue from the checkpoint in --out."))
@option("--overwrite", is_flag=True, help=N_("Start afresh even if --out holds a checkpoint (deleting it)."))
@option("-q", "--quiet", is_flag=True, help=N_("No progress bar or log lines."))
def command(config_file: str | None, resume: bool, overwrite: bool, quiet: bool, **given: Any) -> None:
    from attnlab.training import train

    check_resume_or_overwrite(resume, overwrite)
    try:
        config = merge_config(given, config_file, resume)
        ctx = click.get_current_context()
        if config.tokenizer != "bpe":
            refuse_unused(ctx, ["vocab_size"], tr("with the {tokenizer} tokenizer, whose tokens are the corpus' "
                                                  "characters", tokenizer=config.tokenizer))
        if config.arch == "gpt":
            refuse_unused(ctx, ["num_kv_heads"], tr("with --arch gpt, whose every head has its own keys and values"))
        result = train(config, resume=resume, quiet=quiet, overwrite=overwrite, on_save=draw_loss_curve)
    except (ValueError, TypeError, ImportError) as err:
        raise click.ClickException(str(err)) from None
    finally:
        from attnlab.training.distributed import teardown_distributed

        teardown_distributed()
    if result.stop_reason == "interrupted":  # stopped by Ctrl-C or SIGTERM, after saving: say how to go on
        click.echo(tr("Interrupted at step {step}; the checkpoint is saved in {out!r}: continue with --resume.",
                      step=result.step, out=str(result.out)), err=True)
        raise click.exceptions.Exit(130)
