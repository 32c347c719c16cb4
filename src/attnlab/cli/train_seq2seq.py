"""``attnlab train-seq2seq``: an encoder-decoder Transformer on a generated task or a TSV file of pairs."""

from __future__ import annotations

import functools
from typing import Any, get_args

import click

from attnlab.cli.config_options import FieldOption
from attnlab.cli.lang import Command
from attnlab.cli.params import SEED, check_resume_or_overwrite, refuse_unused
from attnlab.cli.train import check_resume, draw_loss_curve, parallel_options, resumed_config, with_flags
from attnlab.data.tasks import TASKS
from attnlab.i18n import N_, tr
from attnlab.layers.block import Norm
from attnlab.models.config import DTYPES
from attnlab.models.registry import ARCHITECTURES
from attnlab.training.config import SCHEDULES, Seq2SeqTrainConfig


def merge_config(given: dict[str, Any], resume: bool) -> Seq2SeqTrainConfig:
    """Defaults < the checkpoint's config (on resume) < the flags given; ``--data`` replaces the task."""
    saved, step = resumed_config(given.get("out") or Seq2SeqTrainConfig.out, "seq2seq") if resume else ({}, 0)
    values = with_flags(saved, given, Seq2SeqTrainConfig)
    if given.get("data") is not None and given.get("task") is None:
        values["task"] = None  # a TSV file instead of the default (or the checkpoint's) task
    if given.get("task") is not None and given.get("data") is None:
        values["data"] = None
    config = Seq2SeqTrainConfig.from_dict(values)
    if resume:
        check_resume(config, saved, step)
    return config


EXAMPLES = "\n".join([
    "\b", N_("Examples:"),
    "  attnlab train-seq2seq --task dates --out out/dates --time-budget 3",
    "  attnlab train-seq2seq --task numbers --preset transformer-small --label-smoothing 0.1 --out out/numbers",
    "  attnlab train-seq2seq --data pairs.tsv --out out/mine --schedule inverse-sqrt --warmup 400",
    "  attnlab train-seq2seq --out out/dates --resume --steps 20000",
    '  attnlab translate --checkpoint out/dates "5 mars 2021"',
])


def _presets() -> dict[str, str]:
    return {"presets": ", ".join(p for name in Seq2SeqTrainConfig.ARCHS for p in ARCHITECTURES[name].presets)}


option = functools.partial(click.option, cls=FieldOption, config=Seq2SeqTrainConfig)


@click.command(name="train-seq2seq", cls=Command,
               help=N_('Train an encoder-decoder Transformer ("Attention Is All You Need") to translate.'),
               epilog=EXAMPLES)
@option("--task", type=click.Choice(list(TASKS)),
        help=N_("A generated task: dates (seven languages -> ISO 8601) or numbers (digits -> Chinese numerals)."))
@option("--data", type=click.Path(exists=True, dir_okay=False),
        help=N_("Instead of --task: a UTF-8 file of source<TAB>target lines."))
@option("--out", help=N_("Output directory: checkpoints (vocabulary inside), loss curve."))
@option("--preset", values=_presets, help=N_("A preset of the Transformer's config: {presets}."))
@option("--d-model", type=int, help=N_("Override the preset: model width."))
@option("--num-heads", type=int, help=N_("Override the preset: attention heads."))
@option("--num-encoder-layers", type=int, help=N_("Override the preset: encoder blocks."))
@option("--num-decoder-layers", type=int, help=N_("Override the preset: decoder blocks."))
@option("--d-ff", type=int, help=N_("Override the preset: feed-forward width."))
@option("--context-length", type=int, help=N_("Override the preset: the longest source (and target + 1)."))
@option("--dropout", type=float, help=N_("Override the preset: dropout."))
@option("--norm", type=click.Choice(get_args(Norm)),
        help=N_("Where each block's LayerNorms sit: the paper's post-LN, or pre-LN.  [default: the preset's]"))
@option("--steps", "--max-iters", "max_iters", type=int, help=N_("Optimizer steps."))
@option("--time-budget", type=float,
        help=N_("Train for this many minutes: the first steps are timed, then warm-up and cosine are planned to reach "
                "--min-lr when the time is spent, and re-planned as the speed changes. With --steps too, whichever "
                "ends first."))
@option("--batch-size", type=int, help=N_("Pairs per micro-batch, per process."))
@option("--grad-accum", type=int, help=N_("Micro-batches per step, over all processes."))
@option("--lr", "--learning-rate", "learning_rate", type=float, help=N_("Peak learning rate."))
@option("--min-lr", type=float, help=N_("Learning rate at the end of the cosine."))
@option("--warmup", "--warmup-iters", "warmup_iters", type=int, help=N_("Warm-up steps."))
@option("--schedule", type=click.Choice(SCHEDULES),
        help=N_("After warm-up: a cosine over --steps, or the paper's 1/sqrt(step)."))
@option("--label-smoothing", type=float, help=N_("Label smoothing (the paper: 0.1)."))
@option("--weight-decay", type=float, help=N_("AdamW weight decay on matrices."))
@option("--grad-clip", type=float, help=N_("Max gradient norm, 0 = off."))
@option("--eval-interval", type=int, help=N_("Steps between evals and checkpoints."))
@option("--eval-iters", type=int, help=N_("Batches per loss estimate."))
@option("--train-pairs", type=int, help=N_("--task: training pairs drawn before training."))
@option("--val-pairs", type=int, help=N_("--task: held-out pairs for the validation loss."))
@option("--truncate", is_flag=True, default=None, help=N_("Cut sources longer than the context instead of refusing "
                                                          "them."))
@option("--seed", type=SEED, help=N_("Seed for the data, weights, batches and dropout."))
@option("--compile/--no-compile", "compile", default=None, help=N_("torch.compile the model."))
@option("--device", help=N_("auto, cpu, cuda, cuda:N."))
@option("--dtype", type=click.Choice(list(DTYPES)),
        help=N_("Mixed precision: autocast's dtype; weights stay fp32 (fp16: CUDA only)."))
@parallel_options(option)
@option("--resume", is_flag=True, help=N_("Continue from the checkpoint in --out."))
@option("--overwrite", is_flag=True, help=N_("Start afresh even if --out holds a checkpoint (deleting it)."))
@option("-q", "--quiet", is_flag=True, help=N_("No progress bar or log lines."))
def command(resume: bool, overwrite: bool, quiet: bool, **given: Any) -> None:
    from attnlab.training.seq2seq_trainer import train_seq2seq

    check_resume_or_overwrite(resume, overwrite)
    if given.get("task") is not None and given.get("data") is not None:
        raise click.UsageError(tr("give the data as --task NAME or --data FILE, not both"))
    try:
        config = merge_config(given, resume)
        ctx = click.get_current_context()
        if config.data is not None:
            refuse_unused(ctx, ["train_pairs", "val_pairs"], tr("with --data FILE, whose pairs are all read"))
        if config.schedule == "inverse-sqrt":
            refuse_unused(ctx, ["min_lr"], tr("with --schedule inverse-sqrt, which falls as 1/√step to no floor"))
        result = train_seq2seq(config, resume=resume, quiet=quiet, overwrite=overwrite, on_save=draw_loss_curve)
    finally:
        from attnlab.training.distributed import teardown_distributed

        teardown_distributed()
    if result.stop_reason == "interrupted":
        click.echo(tr("Interrupted at step {step}; the checkpoint is saved in {out!r}: continue with --resume.",
                      step=result.step, out=str(result.out)), err=True)
        raise click.exceptions.Exit(130)
