"""The configuration of a translation run: :class:`TrainConfig`'s fields, plus what an encoder-decoder needs.

The data is a generated task (``task = "dates"`` or ``"numbers"``, see :mod:`attnlab.data.tasks`) or a
UTF-8 TSV file of ``source<TAB>target`` lines (``data = "pairs.tsv"``): exactly one of the two. Model
sizes are a preset of :class:`attnlab.models.TransformerConfig` (``transformer-tiny`` …) with overrides in
``model``. On top of the GPT trainer's settings: the paper's label smoothing and its warm-up +
inverse-square-root learning-rate schedule, both optional.
"""

from __future__ import annotations

from dataclasses import dataclass

from attnlab.i18n import tr
from attnlab.training.config import TrainConfig

SCHEDULES = ("cosine", "inverse-sqrt")


@dataclass
class Seq2SeqTrainConfig(TrainConfig):
    """A :class:`TrainConfig` for ``attnlab train-seq2seq``; the fields below are new or have new defaults."""

    task: str | None = "dates"            # "dates" or "numbers" (generated), or None with ``data``
    data: str | None = None               # a TSV file of source<TAB>target lines, or None with ``task``
    out: str = "out/seq2seq"
    arch: str = "transformer"
    preset: str = "transformer-tiny"
    max_iters: int = 100_000              # a time budget usually ends the run first
    batch_size: int = 64                  # pairs per micro-batch, per process
    learning_rate: float = 1e-3
    min_lr: float = 1e-4
    warmup_iters: int = 200
    weight_decay: float = 0.01
    beta2: float = 0.98                   # the paper's Adam betas: (0.9, 0.98)
    eval_interval: int = 500
    eval_iters: int = 10
    label_smoothing: float = 0.0          # the paper trains with 0.1
    schedule: str = "cosine"              # "cosine", or "inverse-sqrt": the paper's warm-up then 1/√step
    train_pairs: int = 100_000            # a generated task: training pairs drawn once, before the clock starts
    val_pairs: int = 500                  # a generated task: held-out pairs for the validation loss
    truncate: bool = False                # cut sources longer than context_length instead of refusing them

    ARCHS = ("transformer",)

    def __post_init__(self) -> None:
        super().__post_init__()
        if (self.task is None) == (self.data is None):
            raise ValueError(tr("task, data: give exactly one: a generated task (dates, numbers) or a TSV file of "
                                "source<TAB>target lines, got task={task!r}, data={data!r}",
                                task=self.task, data=self.data))
        if self.task is not None and self.task not in ("dates", "numbers"):
            raise ValueError(tr("task: expected 'dates' or 'numbers', got {task!r}", task=self.task))
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(tr("label_smoothing: expected in [0, 1), got {value!r}", value=self.label_smoothing))
        if self.schedule not in SCHEDULES:
            raise ValueError(tr("schedule: expected 'cosine' or 'inverse-sqrt', got {value!r}", value=self.schedule))
        if self.schedule == "inverse-sqrt" and self.warmup_iters < 1:
            raise ValueError(tr("warmup_iters: the inverse-sqrt schedule needs at least 1 warm-up step, "
                                "got {value!r}", value=self.warmup_iters))
        for name in ("train_pairs", "val_pairs"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(tr("{name}: expected a positive integer, got {value!r}", name=name, value=value))

    @property
    def source(self) -> str:
        """What the data is, for titles and logs: the task's name or the file's path."""
        return self.task if self.task is not None else str(self.data)
