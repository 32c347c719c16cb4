"""``attnlab train``: a GPT or a modern decoder on a text corpus, from one command (also under ``torchrun``)."""

from __future__ import annotations

from typing import Any

import click

from attnlab.cli.lang import Command
from attnlab.i18n import N_, tr

# flag name -> TrainConfig field (None values are "not given" and do not override)
TRAIN_FLAGS = ("data", "out", "tokenizer", "vocab_size", "arch", "preset", "max_iters", "batch_size", "grad_accum",
               "learning_rate", "min_lr", "warmup_iters", "lr_decay_iters", "weight_decay", "grad_clip",
               "eval_interval", "eval_iters", "seed", "time_budget", "compile", "device", "val_fraction", "dtype")
MODEL_FLAGS = ("num_layers", "num_heads", "num_kv_heads", "d_model", "d_ff", "context_length", "dropout")

# shown after the options, line by line as written (click's \b); only the heading is translated
EXAMPLES = "\n".join([
    "\b", N_("Examples:"),
    "  attnlab train --data shakespeare --preset baby --out out/baby",
    "  attnlab train --arch modern --preset baby --out out/modern",
    "  attnlab train --out out/baby --resume --max-iters 4000",
    "  attnlab train --preset gpt2-small --data corpus.txt --tokenizer bpe --dtype bf16",
    "  torchrun --nproc_per_node=2 --no-python attnlab train --preset tiny --grad-accum 2",
])


def merge_config(given: dict[str, Any], config_file: str | None, resume: bool):
    """Defaults < the checkpoint's config (on resume) < the TOML file < the flags given."""
    from dataclasses import fields
    from pathlib import Path

    from attnlab.training import TrainConfig, load_checkpoint, load_toml
    from attnlab.training.config import check_keys

    values: dict[str, Any] = {}
    if resume:
        out = given.get("out") or TrainConfig().out
        values = load_checkpoint(out).state["train_config"] if Path(out).exists() else {}
        if not values:
            raise ValueError(tr("resume: no checkpoint in {out!r} (expected {out}/checkpoint.json)", out=out))
    if config_file:
        from_file = load_toml(config_file)
        check_keys(from_file, [f.name for f in fields(TrainConfig)], f"config file {config_file!r}")
        model = {**values.get("model", {}), **from_file.pop("model", {})}
        values = {**values, **from_file, "model": model}
    values.update({k: v for k, v in given.items() if k in TRAIN_FLAGS and v is not None})
    model_flags = {k: v for k, v in given.items() if k in MODEL_FLAGS and v is not None}
    values["model"] = {**values.get("model", {}), **model_flags}
    return TrainConfig.from_dict(values)


def draw_loss_curve(trainer) -> None:
    """After every checkpoint: ``OUT/loss.png``, the loss so far (the trainer saves; the CLI draws)."""
    from attnlab.viz.figures import save_figure
    from attnlab.viz.loss_curve import loss_figure

    what = getattr(trainer.config, "source", trainer.config.data)  # a translation run names its task or file
    title = f"{what}: {sum(p.numel() for p in trainer.model.parameters()):,} parameters"
    save_figure(loss_figure(trainer.train_losses, trainer.evals, title), trainer.out / "loss.png", dpi=110)


@click.command(name="train", cls=Command,
               help=N_("Train a GPT (or a Llama-style decoder) to predict the next token of a corpus."),
               epilog=EXAMPLES)
@click.option("--data", help=N_("'shakespeare' (built in), a text file or a directory.  [default: shakespeare]"))
@click.option("--out", help=N_("Output directory: checkpoints, tokenizer, loss curve.  [default: out/train]"))
@click.option("--tokenizer", type=click.Choice(["char", "bpe"]), help=N_("Characters or byte-level BPE.  [default: "
                                                                         "char]"))
@click.option("--vocab-size", type=int, help=N_("BPE vocabulary size.  [default: 4096]"))
@click.option("--arch", type=click.Choice(["gpt", "modern"]),
              help=N_("gpt (GPT-2's layout) or modern (Llama's: RoPE, grouped-query attention, RMSNorm, SwiGLU).  "
                      "[default: gpt]"))
@click.option("--preset", help=N_("Model preset: tiny, baby, ... (modern also: llama-3.2-1b, qwen2.5-0.5b, "
                                  "mistral-7b).  [default: baby]"))
@click.option("--num-layers", type=int, help=N_("Override the preset: number of blocks."))
@click.option("--num-heads", type=int, help=N_("Override the preset: attention heads."))
@click.option("--num-kv-heads", type=int, help=N_("Override the preset: key/value heads (--arch modern)."))
@click.option("--d-model", type=int, help=N_("Override the preset: model width."))
@click.option("--d-ff", type=int, help=N_("Override the preset: feed-forward width (default 4·d_model)."))
@click.option("--context-length", type=int, help=N_("Override the preset: the longest sequence (block size)."))
@click.option("--dropout", type=float, help=N_("Override the preset: dropout."))
@click.option("--max-iters", type=int, help=N_("Optimizer steps.  [default: 2000]"))
@click.option("--batch-size", type=int, help=N_("Sequences per micro-batch, per process.  [default: 12]"))
@click.option("--grad-accum", type=int, help=N_("Micro-batches per step, over all processes.  [default: 1]"))
@click.option("--lr", "--learning-rate", "learning_rate", type=float, help=N_("Peak learning rate.  [default: 1e-3]"))
@click.option("--min-lr", type=float, help=N_("Learning rate at the end of the cosine.  [default: 1e-4]"))
@click.option("--warmup-iters", type=int, help=N_("Linear warm-up steps.  [default: 100]"))
@click.option("--lr-decay-iters", type=int, help=N_("Cosine length in steps.  [default: max-iters]"))
@click.option("--weight-decay", type=float, help=N_("AdamW weight decay on matrices.  [default: 0.1]"))
@click.option("--grad-clip", type=float, help=N_("Max gradient norm, 0 = off.  [default: 1.0]"))
@click.option("--eval-interval", type=int, help=N_("Steps between evals and checkpoints.  [default: 250]"))
@click.option("--eval-iters", type=int, help=N_("Batches per loss estimate.  [default: 50]"))
@click.option("--val-fraction", type=float, help=N_("Share of the corpus held out.  [default: 0.1]"))
@click.option("--seed", type=int, help=N_("Seed for weights, batches and dropout.  [default: 1337]"))
@click.option("--time-budget", type=float,
              help=N_("Train for this many minutes: the first steps are timed, then warm-up and cosine are planned to "
                      "reach --min-lr when the time is spent, and re-planned as the speed changes. With --max-iters "
                      "too, whichever ends first."))
@click.option("--compile/--no-compile", "compile", default=None, help=N_("torch.compile the model.  [default: off]"))
@click.option("--device", help=N_("auto, cpu, cuda, cuda:N.  [default: auto]"))
@click.option("--dtype", type=click.Choice(["fp32", "bf16", "fp16"]),
              help=N_("Mixed precision: autocast's dtype; weights and checkpoints stay fp32 (fp16: CUDA only).  "
                      "[default: fp32]"))
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help=N_("A TOML file of these settings."))
@click.option("--resume", is_flag=True, help=N_("Continue from the checkpoint in --out."))
@click.option("--overwrite", is_flag=True, help=N_("Start afresh even if --out holds a checkpoint (deleting it)."))
@click.option("-q", "--quiet", is_flag=True, help=N_("No progress bar or log lines."))
def command(config_file: str | None, resume: bool, overwrite: bool, quiet: bool, **given: Any) -> None:
    from attnlab.training import train

    try:
        config = merge_config(given, config_file, resume)
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
