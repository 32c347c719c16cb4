"""The training loop: next-token prediction with a :class:`attnlab.models.GPT` (or, with ``arch="modern"``, a
:class:`attnlab.models.ModernDecoder`) on a text corpus.

One step: ``grad_accum`` micro-batches (split over the processes), loss averaged, gradients
clipped, an AdamW step at the scheduled learning rate. Every ``eval_interval`` steps the train
and validation losses are estimated on fixed batches and a checkpoint is written. The run stops
at ``max_iters``, at the end of the plan that a ``time_budget`` makes (:mod:`attnlab.training.budget`), or on
Ctrl-C (SIGINT/SIGTERM): in each case it finishes the step, writes a checkpoint and returns normally.
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import torch
from rich.console import Console
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

from attnlab.data import (
    encode_cached,
    get_batch,
    load_text,
    load_tokenizer,
    save_tokenizer,
    stream_generator,
    train_tokenizer,
    train_val_split,
)
from attnlab.data.tokens import check_long_enough
from attnlab.fast import swap_modules
from attnlab.files import check_writable_dir
from attnlab.i18n import tr
from attnlab.models import GPTConfig, ModernDecoderConfig, is_quantized
from attnlab.models.checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from attnlab.models.registry import architecture
from attnlab.training.budget import BudgetPlanner, Plan, fit_schedule
from attnlab.training.config import TrainConfig
from attnlab.training.distributed import (
    all_reduce_sum,
    barrier,
    gather_rng_states,
    restore_rng_state,
    setup_distributed,
)
from attnlab.training.distributed_checkpoint import load_sharded, load_whole, save_sharded
from attnlab.training.footprint import check_training_fits
from attnlab.training.mixed_precision import MixedPrecision
from attnlab.training.model_config import build_model_config, check_same_shape, shape_differences
from attnlab.training.optim import CosineSchedule, configure_optimizer
from attnlab.training.parallel import build_layout, clip_grad_norm, gradient_sync, parallelize
from attnlab.training.progress import progress_bar
from attnlab.training.run_dir import check_fresh
from attnlab.training.stop_signals import stop_signals


@dataclass
class TrainResult:
    """How a run ended. ``train_losses``: ``(step, loss)``; ``evals``: ``(step, train, val)``."""

    out: Path
    step: int
    stop_reason: str  # "max_iters", "time_budget", "interrupted" or "stop_at"
    train_losses: list[tuple[int, float]]
    evals: list[tuple[int, float, float]]
    tokens_per_s: float
    train_seconds: float
    checkpoint: Path | None
    last_lr: float = float("nan")  # the learning rate of the last step
    plan: Plan | None = None       # a time budget's last plan


#: what a checkpoint keeps of the schedule: where a time budget's plan had put the warm-up and the cosine
SCHEDULE_STATE = ("warmup", "end", "anchor", "anchor_progress")


class Trainer:
    """Set up data, model and optimizer from a :class:`TrainConfig` (and a checkpoint, if resuming), then train.

    What is specific to next-token prediction sits in a few methods that a trainer for another objective
    overrides: :meth:`_prepare_data`, :meth:`_build_model_config`, :meth:`_build_model`, :meth:`draw_batch`,
    :meth:`compute_loss`, :meth:`learning_rate_at` and :attr:`tokens_per_step`. The loop, evaluation, checkpoints,
    exact resume, the time budget, Ctrl-C and data parallelism are shared.
    """

    def __init__(self, config: TrainConfig, resume: bool = False, console: Console | None = None,
                 quiet: bool = False, overwrite: bool = False,
                 on_save: Callable[[Trainer], None] | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.config, c = config, config
        self.clock = clock  # the time budget's and the progress bar's (tests give a fake one)
        self.planned: int | None = None  # the step count a time budget's latest plan ends at
        self.shown_plan = 0  # ... and the one it last printed (again when the plan moves by more than a tenth)
        self.on_save = on_save  # e.g. the CLI redraws the loss curve after every checkpoint
        self.dist = d = setup_distributed(c.device)
        self.precision = MixedPrecision(c.dtype, d.device)  # autocast, fp16's gradient scaler, TF32 on CUDA
        self.console = console or Console()
        self.show = d.is_main and not quiet
        self.out = Path(c.out)
        made_here = not self.out.exists()
        try:
            self._set_up(resume, overwrite)
        except BaseException:
            if made_here and d.is_main:  # a run that could not start leaves no half-made output directory
                shutil.rmtree(self.out, ignore_errors=True)
            raise
        self._stop_requested = False

    # ---- set-up -------------------------------------------------------------------------------
    def _set_up(self, resume: bool, overwrite: bool) -> None:
        """Output directory, data, model, optimizer and (when resuming) the saved state, in that order."""
        c, d = self.config, self.dist
        if d.is_main:
            check_writable_dir(self.out, "out")  # before any time is spent training
            if not resume:
                check_fresh(self.out, overwrite)
        barrier(d)
        ckpt = load_checkpoint(self.out) if resume else None
        self.layout = layout = build_layout(c.parallel, c.tp_size, d)  # the mesh: data-parallel rank and size
        if layout.sharded and self.precision.scaler is not None:
            raise ValueError(tr("dtype: --parallel {mode} trains in bf16 or fp32 (FSDP2 keeps fp32 master weights "
                                "under bf16, with no loss scaling), got fp16", mode=c.parallel))
        self.tokenizer, self.train_data, self.val_data = self._prepare_data(ckpt)
        self.model_config = self._build_model_config()
        if c.grad_accum % layout.dp_size:
            raise ValueError(tr("grad_accum: must be a multiple of the number of processes ({world_size}), got "
                                "{grad_accum}", world_size=layout.dp_size, grad_accum=c.grad_accum))
        check_training_fits(self._build_model, self.model_config, c.batch_size, self.tokenizer.vocab_size, d.device,
                            layout.world_size if layout.sharded else 1)
        torch.manual_seed(c.seed)  # the same initial weights on every process
        self.model = self._build_model(self.model_config).to(d.device)
        if is_quantized(self.model):
            raise ValueError(tr("train: the model is weight-only quantized, which is for inference; train the "
                                "floating-point model, then quantize it"))
        if c.accelerate and not layout.sharded:  # the fast twins, in place (the state dict stays the same)
            swap_modules(self.model)
        parallelize(self.model, layout, c.dtype, c.activation_checkpointing)
        self.optimizer = configure_optimizer(self.model, c.learning_rate, c.weight_decay, (c.beta1, c.beta2))
        self.train_losses: list[tuple[int, float]] = []  # (step, loss)
        self.evals: list[tuple[int, float, float]] = []  # (step, train loss, val loss)
        self.step, self.saved_step = 0, -1
        self.schedule = CosineSchedule(c.learning_rate, c.min_lr, c.warmup_iters, c.decay_iters)
        if ckpt is not None:
            self._restore(ckpt)
        else:
            torch.manual_seed(c.seed + layout.dp_rank)  # dropout differs per data-parallel process
        # torch.compile of a module is a module (an OptimizedModule); its stub says only "a callable"
        fwd = cast(nn.Module, torch.compile(self.model)) if c.compile else self.model
        self.eval_model = fwd
        ddp = d.enabled and not layout.sharded
        self.train_model = DistributedDataParallel(
            fwd, device_ids=[d.device.index] if d.device.type == "cuda" else None) if ddp else fwd
        if layout.sharded and not d.enabled and self.show:  # said once the run is sure to start
            self.console.print(tr("--parallel {mode} outside torchrun: training as one process", mode=c.parallel))

    def _prepare_data(self, ckpt: Checkpoint | None):
        c, d = self.config, self.dist
        assert c.data is not None  # TrainConfig.check_data refuses None
        text = load_text(c.data)
        shared = self.out / "tokenizer.json"
        if ckpt is not None:
            tokenizer = ckpt.tokenizer
        elif d.is_main:
            tokenizer = train_tokenizer(c.tokenizer, text, c.vocab_size)
            save_tokenizer(tokenizer, shared)
        barrier(d)  # the first process trained the tokenizer and encoded the corpus; the rest reuse both
        if ckpt is None and not d.is_main:
            tokenizer = load_tokenizer(shared)
        if d.is_main:
            tokens = encode_cached(text, tokenizer, self.out / "cache")
        barrier(d)
        if not d.is_main:
            tokens = encode_cached(text, tokenizer, self.out / "cache")
        train, val = train_val_split(tokens, c.val_fraction)
        return tokenizer, train, val

    def _build_model_config(self) -> GPTConfig | ModernDecoderConfig:
        """The preset, the overrides and the tokenizer's vocabulary, checked against the data."""
        config = build_model_config(self.config, self.tokenizer.vocab_size)
        for split, data in (("train", self.train_data), ("validation", self.val_data)):
            check_long_enough(data, config.context_length, split)
        return config

    def _build_model(self, model_config: GPTConfig | ModernDecoderConfig) -> nn.Module:
        return architecture(self.config.arch).model(model_config)

    def _restore(self, ckpt: Checkpoint) -> None:
        if ckpt.sharded:  # any layout reads a sharded checkpoint, whatever the number of processes that wrote it
            load_sharded(ckpt.path, self.model, self.optimizer,  # names the first tensor of another shape
                         shape_differences(ckpt.state["model_config"], self.model_config))
        check_same_shape(ckpt.state["model_config"], self.model_config, ckpt.path)
        if not ckpt.sharded and self.layout.sharded:  # whole tensors: each process keeps its pieces
            load_whole(ckpt, self.model, self.optimizer)
        elif not ckpt.sharded:
            ckpt.load_weights(self.model)
            ckpt.load_optimizer(self.optimizer)  # checked against the model's parameters first
        self.precision.load_state_dict(ckpt.state.get("grad_scaler"))
        self.step = self.saved_step = ckpt.step
        self.train_losses = [tuple(x) for x in ckpt.state["history"]["train"]]
        self.evals = [tuple(x) for x in ckpt.state["history"]["eval"]]
        saved = ckpt.state.get("schedule")
        if self.config.time_budget is not None and saved is not None:  # a budget goes on with the rest of the cosine
            self.schedule = dataclasses.replace(self.schedule, **{k: saved[k] for k in SCHEDULE_STATE})
        if not restore_rng_state(self.dist, ckpt.rng):
            torch.manual_seed(self.config.seed + self.layout.dp_rank + ckpt.step)

    # ---- the loop -----------------------------------------------------------------------------
    @property
    def tokens_per_step(self) -> int:
        return self.config.batch_size * self.config.grad_accum * self.model_config.context_length

    def draw_batch(self, split: str, generator: torch.Generator) -> tuple[Tensor, ...]:
        """One micro-batch of ``split`` ("train" or "val"), drawn with ``generator``, on this process' device."""
        data = self.train_data if split == "train" else self.val_data
        x, y = get_batch(data, self.model_config.context_length, self.config.batch_size, generator)
        return x.to(self.dist.device), y.to(self.dist.device)

    def compute_loss(self, model: nn.Module, batch: tuple[Tensor, ...]) -> Tensor:
        """The mean loss of ``model`` (possibly compiled or DDP-wrapped) on one micro-batch."""
        inputs, targets = batch
        return model(inputs, targets=targets).loss

    def learning_rate_at(self, step: int) -> float:
        """The learning rate of optimizer step ``step``: warm-up, then the cosine (:attr:`schedule`, which a time
        budget fits to its plan)."""
        return self.schedule(step)

    def train_step(self) -> float:
        """One optimizer step; returns this process' mean micro-batch loss."""
        c, d, layout = self.config, self.dist, self.layout
        local = c.grad_accum // layout.dp_size
        lr = self.learning_rate_at(self.step)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.train_model.train()
        total = torch.zeros((), device=d.device)
        for micro in range(local):
            slot = layout.dp_rank * local + micro  # micro-batch slot within the global step: its own data stream
            batch = self.draw_batch("train", stream_generator(c.seed, "train", self.step, slot))
            # the gradients are summed across the data-parallel processes once, at the last micro-batch
            with gradient_sync(self.train_model, micro == local - 1):
                with self.precision.autocast():
                    loss = self.compute_loss(self.train_model, batch)
                self.precision.backward(loss / local)
            total += loss.detach()
        clip = (lambda params, most: clip_grad_norm(params, most, d.world_size)) if layout.sharded else None
        self.precision.step(self.optimizer, self.model.parameters(), c.grad_clip, clip)
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        return total.item() / local

    @torch.no_grad()
    def evaluate(self) -> tuple[float, float]:
        """Mean loss on ``eval_iters`` fixed batches of each split (the same batches at every eval)."""
        c, d, layout = self.config, self.dist, self.layout
        self.eval_model.eval()
        sums = []
        # sharded weights are gathered inside every forward, so every process runs as many: the last round's
        # batches past eval_iters are run and left out
        rounds = -(-c.eval_iters // layout.dp_size) if layout.sharded else None
        for split in ("train", "val"):
            total = 0.0
            for i in range(layout.dp_rank, c.eval_iters if rounds is None else rounds * layout.dp_size,
                           layout.dp_size):
                batch = self.draw_batch(split, stream_generator(c.seed, "eval", split, min(i, c.eval_iters - 1)))
                with self.precision.autocast():
                    loss = self.compute_loss(self.eval_model, batch).item()
                total += loss if i < c.eval_iters else 0.0
            sums.append(total)
        train_sum, val_sum = all_reduce_sum(d, sums)  # a TP group's processes add the same sums: divide by tp
        return train_sum / c.eval_iters / layout.tp_size, val_sum / c.eval_iters / layout.tp_size

    def save(self) -> Path | None:
        """Write a checkpoint (first process only; every process must call it), then call ``on_save``."""
        rng = gather_rng_states(self.dist)
        self.saved_step = self.step
        layout, is_main = self.layout, self.dist.is_main
        if not is_main and not layout.sharded:
            return None
        state = {"train_config": self.config.to_dict(), "architecture": self.config.arch,
                 "model_config": dataclasses.asdict(self.model_config),
                 "history": {"train": self.train_losses, "eval": self.evals}, "world_size": self.dist.world_size,
                 "parallel": {"mode": layout.mode, "dp": layout.dp_size, "tp": layout.tp_size},
                 "grad_scaler": self.precision.state_dict(),
                 "schedule": {k: v for k, v in self.schedule.state_dict().items() if k in SCHEDULE_STATE}}
        if layout.sharded:
            path = save_sharded(self.out, self.step, self.model, self.optimizer, state, self.tokenizer, rng,
                                self.config.keep_checkpoints, is_main)
        else:
            path = save_checkpoint(self.out, self.step, self.model, self.optimizer, state, self.tokenizer, rng,
                                   keep=self.config.keep_checkpoints)
        if not is_main:
            return None
        if self.on_save is not None:
            self.on_save(self)
        return path

    def _eval_and_log(self) -> None:
        train_loss, val_loss = self.evaluate()
        self.evals.append((self.step, train_loss, val_loss))
        if self.show:
            self.console.print(tr("step {step:>6}: train loss {train_loss:.4f}, val loss {val_loss:.4f}",
                                  step=self.step, train_loss=train_loss, val_loss=val_loss))

    def train(self, stop_at: int | None = None) -> TrainResult:
        """Train until ``max_iters`` (or ``stop_at``, the time budget's plan, Ctrl-C); checkpoint; return the result.

        With a time budget, a :class:`BudgetPlanner` turns the minutes into a step count after a short probe and
        revises it as the speed changes; the cosine follows (:meth:`follow`) and the run ends at the plan's last
        step, or when the budget is spent, whichever comes first.
        """
        c = self.config
        planner = self.budget_planner()
        end, train_seconds, tokens, reason, ckpt = c.max_iters, 0.0, 0, "max_iters", None
        with stop_signals(self), progress_bar(self.console, self.show, self.clock) as progress:
            task = progress.add_task(tr("train"), total=None if planner else end, completed=self.step,
                                     of="?" if planner else f"{end:,}", loss=float("nan"), lr=0.0, tps=0.0)
            if planner is not None:
                planner.start()
            while self.step < end:
                if stop_at is not None and self.step >= stop_at:
                    reason = "stop_at"
                    break
                t0 = self.clock()
                local_loss = self.train_step()
                dt = self.clock() - t0
                train_seconds, tokens = train_seconds + dt, tokens + self.tokens_per_step
                expired = planner is not None and planner.expired()
                loss, stop, spent = all_reduce_sum(self.dist, [local_loss, float(self._stop_requested),
                                                               float(expired)])
                loss /= self.dist.world_size
                self.train_losses.append((self.step, loss))
                lr = self.optimizer.param_groups[0]["lr"]
                progress.update(task, completed=self.step, loss=loss, lr=lr, tps=tokens / max(train_seconds, 1e-9))
                plan = None if planner is None else planner.stepped(self.step, self.clock() - t0)
                if self.step % c.eval_interval == 0 or self.step == c.max_iters:
                    t1 = self.clock()
                    self._eval_and_log()
                    ckpt = self.save()
                    plan = plan if planner is None else planner.evaluated(self.step, self.clock() - t1) or plan
                if plan is not None:
                    end = self.follow(plan)
                    progress.update(task, total=end, of=f"{end:,}")
                if stop or spent:
                    reason = "interrupted" if stop else "time_budget"
                    break
            else:
                reason = "max_iters" if self.step >= c.max_iters else "time_budget"
        if not self.evals or self.evals[-1][0] != self.step:
            self._eval_and_log()
        if self.saved_step != self.step:
            ckpt = self.save()
        last_lr = self.optimizer.param_groups[0]["lr"]
        if self.show:
            self.console.print(tr("stopped at step {step} ({reason}), learning rate {lr:.3g}; checkpoint in {out!r}",
                                  step=self.step, reason=reason, lr=last_lr, out=str(self.out)))
        return TrainResult(self.out, self.step, reason, list(self.train_losses), list(self.evals),
                           tokens / max(train_seconds, 1e-9), train_seconds, ckpt, last_lr,
                           None if planner is None else planner.plan)

    def budget_planner(self) -> BudgetPlanner | None:
        """The planner of this run's time budget (None without one); every process plans from the same means."""
        c, d = self.config, self.dist
        if c.time_budget is None:
            return None

        def mean(values: list[float]) -> list[float]:
            return [v / d.world_size for v in all_reduce_sum(d, values)]

        return BudgetPlanner(c.time_budget * 60.0, c.max_iters, c.eval_interval, self.clock, mean)

    def follow(self, plan: Plan) -> int:
        """Fit the schedule to ``plan``: warm-up sized on the first plan, the cosine's end moved to the plan's last
        step (or ``lr_decay_iters``, if sooner). Returns the step count the run now ends at."""
        c, schedule, first = self.config, self.schedule, self.planned is None
        fit_schedule(schedule, plan, self.step, c.warmup_iters, c.decay_iters, first)
        if self.show and (first or abs(plan.steps - self.shown_plan) > 0.1 * self.shown_plan):
            self.shown_plan = plan.steps
            self.console.print(tr("time budget: {step_ms:.1f} ms a step, {eval_s:.1f} s an evaluation, {left:.0f} s "
                                  "left: {steps:,} steps in all; {schedule}", step_ms=1000 * plan.step_seconds,
                                  eval_s=plan.eval_seconds, left=plan.seconds_left, steps=plan.steps,
                                  schedule=self.schedule_shape()))
        self.planned = plan.steps
        return plan.steps

    def schedule_shape(self) -> str:
        """The learning-rate schedule in a few words, for the time budget's plan."""
        return tr("warm-up {warmup}, the cosine ends at step {end}", warmup=self.schedule.warmup, end=self.schedule.end)


def train(config: TrainConfig, resume: bool = False, console: Console | None = None, quiet: bool = False,
          stop_at: int | None = None, overwrite: bool = False,
          on_save: Callable[[Trainer], None] | None = None) -> TrainResult:
    """Train a GPT as ``config`` says (see :class:`Trainer`)."""
    with torch.enable_grad():  # callers may sit inside no_grad (the demo does)
        return Trainer(config, resume=resume, console=console, quiet=quiet, overwrite=overwrite,
                       on_save=on_save).train(stop_at)
