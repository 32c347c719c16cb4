"""``attnlab train-seq2seq``: an encoder-decoder Transformer on a generated task or a TSV file of pairs."""

from __future__ import annotations

from typing import Any

import click

from attnlab.cli.lang import Command
from attnlab.cli.train import draw_loss_curve
from attnlab.i18n import N_, tr

# flag name -> Seq2SeqTrainConfig field (None values are "not given" and do not override)
TRAIN_FLAGS = ("task", "data", "out", "preset", "max_iters", "batch_size", "grad_accum", "learning_rate", "min_lr",
               "warmup_iters", "weight_decay", "grad_clip", "eval_interval", "eval_iters", "seed", "time_budget",
               "device", "dtype", "label_smoothing", "schedule", "train_pairs", "val_pairs", "truncate", "compile")
MODEL_FLAGS = ("d_model", "num_heads", "num_encoder_layers", "num_decoder_layers", "d_ff", "context_length",
               "dropout", "norm_first")


def merge_config(given: dict[str, Any], resume: bool):
    """Defaults < the checkpoint's config (on resume) < the flags given; ``--data`` replaces the task."""
    from pathlib import Path

    from attnlab.i18n import tr
    from attnlab.training import load_checkpoint
    from attnlab.training.config import Seq2SeqTrainConfig

    values: dict[str, Any] = {}
    if resume:
        out = given.get("out") or Seq2SeqTrainConfig.out
        values = load_checkpoint(out).state["train_config"] if Path(out).exists() else {}
        if not values:
            raise ValueError(tr("resume: no checkpoint in {out!r} (expected {out}/checkpoint.json)", out=out))
    flags = {k: v for k, v in given.items() if k in TRAIN_FLAGS and v is not None}
    if "data" in flags and "task" not in flags:
        flags["task"] = None  # a TSV file instead of the default (or the checkpoint's) task
    if "task" in flags and "data" not in flags:
        flags["data"] = None
    values.update(flags)
    model_flags = {k: v for k, v in given.items() if k in MODEL_FLAGS and v is not None}
    values["model"] = {**values.get("model", {}), **model_flags}
    return Seq2SeqTrainConfig.from_dict(values)


EXAMPLES = "\n".join([
    "\b", N_("Examples:"),
    "  attnlab train-seq2seq --task dates --out out/dates --time-budget 3",
    "  attnlab train-seq2seq --task numbers --preset transformer-small --label-smoothing 0.1 --out out/numbers",
    "  attnlab train-seq2seq --data pairs.tsv --out out/mine --schedule inverse-sqrt --warmup 400",
    "  attnlab train-seq2seq --out out/dates --resume --steps 20000",
    '  attnlab translate --checkpoint out/dates "5 mars 2021"',
])


@click.command(name="train-seq2seq", cls=Command,
               help=N_('Train an encoder-decoder Transformer ("Attention Is All You Need") to translate.'),
               epilog=EXAMPLES)
@click.option("--task", type=click.Choice(["dates", "numbers"]),
              help=N_("A generated task: dates (seven languages -> ISO 8601) or numbers (digits -> Chinese "
                      "numerals).  [default: dates]"))
@click.option("--data", type=click.Path(exists=True, dir_okay=False),
              help=N_("Instead of --task: a UTF-8 file of source<TAB>target lines."))
@click.option("--out", help=N_("Output directory: checkpoints (vocabulary inside), loss curve.  "
                               "[default: out/seq2seq]"))
@click.option("--preset", help=N_("transformer-tiny, transformer-small, transformer-base, transformer-big.  [default: "
                                  "transformer-tiny]"))
@click.option("--d-model", type=int, help=N_("Override the preset: model width."))
@click.option("--num-heads", type=int, help=N_("Override the preset: attention heads."))
@click.option("--num-encoder-layers", type=int, help=N_("Override the preset: encoder blocks."))
@click.option("--num-decoder-layers", type=int, help=N_("Override the preset: decoder blocks."))
@click.option("--d-ff", type=int, help=N_("Override the preset: feed-forward width."))
@click.option("--context-length", type=int, help=N_("Override the preset: the longest source (and target + 1)."))
@click.option("--dropout", type=float, help=N_("Override the preset: dropout."))
@click.option("--norm-first/--norm-after", "norm_first", default=None,
              help=N_("Pre-LN blocks, or the paper's post-LN.  [default: the preset's]"))
@click.option("--steps", "--max-iters", "max_iters", type=int, help=N_("Optimizer steps.  [default: 100000]"))
@click.option("--time-budget", type=float,
              help=N_("Train for this many minutes: the first steps are timed, then warm-up and cosine are planned to "
                      "reach --min-lr when the time is spent, and re-planned as the speed changes. With --steps "
                      "too, whichever ends first."))
@click.option("--batch-size", type=int, help=N_("Pairs per micro-batch, per process.  [default: 64]"))
@click.option("--grad-accum", type=int, help=N_("Micro-batches per step, over all processes.  [default: 1]"))
@click.option("--lr", "--learning-rate", "learning_rate", type=float,
              help=N_("Peak learning rate.  [default: 1e-3]"))
@click.option("--min-lr", type=float, help=N_("Learning rate at the end of the cosine.  [default: 1e-4]"))
@click.option("--warmup", "--warmup-iters", "warmup_iters", type=int, help=N_("Warm-up steps.  [default: 200]"))
@click.option("--schedule", type=click.Choice(["cosine", "inverse-sqrt"]),
              help=N_("After warm-up: a cosine over --steps, or the paper's 1/sqrt(step).  [default: cosine]"))
@click.option("--label-smoothing", type=float, help=N_("Label smoothing (the paper: 0.1).  [default: 0]"))
@click.option("--weight-decay", type=float, help=N_("AdamW weight decay on matrices.  [default: 0.01]"))
@click.option("--grad-clip", type=float, help=N_("Max gradient norm, 0 = off.  [default: 1.0]"))
@click.option("--eval-interval", type=int, help=N_("Steps between evals and checkpoints.  [default: 500]"))
@click.option("--eval-iters", type=int, help=N_("Batches per loss estimate.  [default: 10]"))
@click.option("--train-pairs", type=int, help=N_("--task: training pairs drawn before training.  [default: 100000]"))
@click.option("--val-pairs", type=int, help=N_("--task: held-out pairs for the validation loss.  [default: 500]"))
@click.option("--truncate", is_flag=True, default=None, help=N_("Cut sources longer than the context instead of "
                                                                "refusing them."))
@click.option("--seed", type=int, help=N_("Seed for the data, weights, batches and dropout.  [default: 1337]"))
@click.option("--compile/--no-compile", "compile", default=None, help=N_("torch.compile the model.  [default: off]"))
@click.option("--device", help=N_("auto, cpu, cuda, cuda:N.  [default: auto]"))
@click.option("--dtype", type=click.Choice(["fp32", "bf16", "fp16"]),
              help=N_("Mixed precision: autocast's dtype; weights stay fp32 (fp16: CUDA only).  [default: fp32]"))
@click.option("--resume", is_flag=True, help=N_("Continue from the checkpoint in --out."))
@click.option("--overwrite", is_flag=True, help=N_("Start afresh even if --out holds a checkpoint (deleting it)."))
@click.option("-q", "--quiet", is_flag=True, help=N_("No progress bar or log lines."))
def command(resume: bool, overwrite: bool, quiet: bool, **given: Any) -> None:
    from attnlab.training.seq2seq_trainer import train_seq2seq

    if given.get("task") is not None and given.get("data") is not None:
        raise click.UsageError(tr("give the data as --task NAME or --data FILE, not both"))
    try:
        config = merge_config(given, resume)
        result = train_seq2seq(config, resume=resume, quiet=quiet, overwrite=overwrite, on_save=draw_loss_curve)
    finally:
        from attnlab.training.distributed import teardown_distributed

        teardown_distributed()
    if result.stop_reason == "interrupted":
        click.echo(tr("Interrupted at step {step}; the checkpoint is saved in {out!r}: continue with --resume.",
                      step=result.step, out=str(result.out)), err=True)
        raise click.exceptions.Exit(130)
