"""The training configuration: one dataclass, validated, loadable from TOML (and a subclass for translation).

Precedence, lowest first: the defaults below, then a TOML file (``--config``), then the flags
given on the command line. A TOML file holds the fields below at top level and model sizes in a
``[model]`` table (the fields of :class:`attnlab.models.GPTConfig`, or of
:class:`attnlab.models.ModernDecoderConfig` with ``arch = "modern"``), e.g.::

    preset = "baby"
    max_iters = 5000
    learning_rate = 2e-3
    [model]
    d_model = 192

**Batch semantics.** One optimizer step sees ``batch_size * grad_accum`` sequences in total,
whatever the number of processes: under ``torchrun --nproc_per_node=N`` each process runs
``grad_accum / N`` micro-batches of ``batch_size`` (so ``grad_accum`` must be a multiple of N)
and DistributedDataParallel averages the gradients. Micro-batch ``k`` of step ``s`` is drawn from
its own stream, seeded by ``(seed, s, k)``, on whichever process runs it; so N processes train
on exactly the batches one process would, and the weights agree up to float rounding.
"""

from __future__ import annotations

import difflib
import tomllib
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Self

from attnlab.arguments import expect_one_of
from attnlab.data.tasks import TASKS
from attnlab.data.tokenizer import TOKENIZERS
from attnlab.field_types import check_field_types
from attnlab.files import read_text
from attnlab.i18n import tr
from attnlab.models.config import check_dtype_name
from attnlab.models.registry import ARCHITECTURES, names_of

#: how the processes of a torchrun share the work (see attnlab.training.parallel)
PARALLEL_MODES = ("ddp", "fsdp", "tp", "fsdp+tp")


@dataclass
class TrainConfig:
    """Everything a training run needs besides the model's size (which comes from ``preset`` + ``model``)."""

    data: str | None = "shakespeare"     # "shakespeare", a text file or a directory of them
    out: str = "out/train"               # checkpoints, tokenizer, token cache and loss curve go here
    tokenizer: str = "char"              # one of attnlab.data.TOKENIZERS
    vocab_size: int = 4096               # BPE only; char uses the corpus' characters
    arch: str = "gpt"                    # one of ARCHS, the registry's decoders (attnlab.models.ARCHITECTURES)
    preset: str = "baby"                 # a preset of the arch's config
    model: dict[str, Any] = field(default_factory=dict)  # config fields overriding the preset
    max_iters: int = 2000
    batch_size: int = 12                 # sequences per micro-batch, per process
    grad_accum: int = 1                  # micro-batches per optimizer step, over all processes
    learning_rate: float = 1e-3
    min_lr: float = 1e-4                 # the cosine decays to this
    warmup_iters: int = 100
    lr_decay_iters: int | None = None    # None: decay over max_iters
    weight_decay: float = 0.1            # on matrices (and embeddings) only, never on biases or norms
    beta1: float = 0.9
    beta2: float = 0.99
    grad_clip: float = 1.0               # max global gradient norm; 0 turns clipping off
    eval_interval: int = 250             # steps between train/val loss estimates (and checkpoints)
    eval_iters: int = 50                 # batches per loss estimate
    seed: int = 1337
    time_budget: float | None = None     # minutes; stop cleanly (with a checkpoint) once spent
    compile: bool = False                # torch.compile the model
    accelerate: bool = True              # train the model's fast twin (attnlab.fast); False: the book's modules
    dtype: str = "fp32"                  # a name of attnlab.models.DTYPES: autocast's dtype (weights stay fp32)
    device: str = "auto"                 # "auto", "cpu", "cuda", "cuda:1", ...
    val_fraction: float = 0.1            # the last part of the corpus is the validation split
    keep_checkpoints: int = 2            # older checkpoints are deleted
    parallel: str = "ddp"                # under torchrun: one of PARALLEL_MODES (attnlab.training.parallel)
    tp_size: int | None = None           # processes splitting each block's heads (tp: all; fsdp+tp: give it)
    activation_checkpointing: bool = False  # recompute each block's activations in backward

    #: the architectures this config trains: the registry's of its kind (a subclass for another kind names its own)
    ARCHS = names_of("decoder")

    def check_data(self) -> None:
        """A GPT reads a corpus: ``data`` names one (None is a translation run's, with a task)."""
        if self.data is None:
            raise ValueError(tr("data: a GPT trains on a text corpus: give \"shakespeare\", a text file or a "
                                "directory of them, got None"))

    def __post_init__(self) -> None:
        self.check_data()
        expect_one_of("tokenizer", self.tokenizer, TOKENIZERS, tr)
        expect_one_of("arch", self.arch, self.ARCHS, tr)
        for name in ("max_iters", "batch_size", "grad_accum", "eval_interval", "eval_iters", "keep_checkpoints"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(tr("{name}: expected a positive integer, got {value!r}", name=name, value=value))
        if self.lr_decay_iters is not None and (isinstance(self.lr_decay_iters, bool) or
                                                not isinstance(self.lr_decay_iters, int) or self.lr_decay_iters < 1):
            raise ValueError(tr("lr_decay_iters: expected a positive integer (or none: the cosine ends at max_iters), "
                                "got {value!r}", value=self.lr_decay_iters))
        for name in ("warmup_iters",):
            if getattr(self, name) < 0:
                raise ValueError(tr("{name}: expected >= 0, got {value!r}", name=name, value=getattr(self, name)))
        if self.tokenizer == "bpe" and not 256 < self.vocab_size <= 2**32:
            raise ValueError(tr("vocab_size: byte-level BPE needs more than 256 tokens, got {vocab_size!r}",
                                vocab_size=self.vocab_size))
        if not self.learning_rate > 0:
            raise ValueError(tr("learning_rate: expected a positive number, got {learning_rate!r}",
                                learning_rate=self.learning_rate))
        if not 0 < self.min_lr <= self.learning_rate:
            raise ValueError(tr("min_lr: expected 0 < min_lr <= learning_rate = {learning_rate}, got {min_lr}",
                                learning_rate=self.learning_rate, min_lr=self.min_lr))
        if not 0 <= self.beta1 < 1 or not 0 <= self.beta2 < 1:
            raise ValueError(tr("beta1, beta2: expected in [0, 1), got {beta1}, {beta2}", beta1=self.beta1,
                                beta2=self.beta2))
        if self.weight_decay < 0 or self.grad_clip < 0:
            raise ValueError(tr("weight_decay, grad_clip: expected >= 0, got {weight_decay}, {grad_clip}",
                                weight_decay=self.weight_decay, grad_clip=self.grad_clip))
        if not 0 < self.val_fraction < 1:
            raise ValueError(tr("val_fraction: expected in (0, 1), got {val_fraction!r}",
                                val_fraction=self.val_fraction))
        if self.time_budget is not None and self.time_budget <= 0:
            raise ValueError(tr("time_budget: expected a positive number of minutes, got {time_budget!r}",
                                time_budget=self.time_budget))
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed < 2**64:
            raise ValueError(tr("seed: expected an integer from 0 to 2**64 - 1 (it must fit 64 bits), got {seed!r}",
                                seed=self.seed))
        check_dtype_name(self.dtype)
        expect_one_of("parallel", self.parallel, PARALLEL_MODES, tr)
        if not isinstance(self.accelerate, bool):
            raise ValueError(tr("accelerate: expected true or false, got {value!r}", value=self.accelerate))
        if self.tp_size is not None and (isinstance(self.tp_size, bool) or not isinstance(self.tp_size, int)
                                         or self.tp_size < 1):
            raise ValueError(tr("tp_size: expected a positive integer, got {value!r}", value=self.tp_size))
        if not isinstance(self.model, dict):
            raise TypeError(tr("model: expected a table of model config fields, got {model_type}",
                               model_type=type(self.model).__name__))

    @property
    def decay_iters(self) -> int:
        return self.lr_decay_iters if self.lr_decay_iters is not None else self.max_iters

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any], source: str = "config") -> Self:
        """Build from a mapping, rejecting unknown keys (with the nearest known one as a hint) and values of the
        wrong type (see :meth:`check_values`)."""
        cls.check_values(values, source)
        return cls(**values)

    @classmethod
    def check_values(cls, values: dict[str, Any], source: str) -> None:
        """Every key known and every value of its field's type, the ``model`` table's against the arch's config
        class; the ValueError names ``source`` (e.g. the TOML file), the key, the value and the type expected."""
        arch = values.get("arch", cls.arch)
        model_cls = ARCHITECTURES[arch].config if arch in cls.ARCHS else None
        model_fields = [f.name for f in fields(model_cls)] if model_cls is not None else []
        misplaced = [k for k in values if k in model_fields and k not in {f.name for f in fields(cls)}]
        if misplaced:
            raise ValueError(tr("{source}: {key!r} is a model setting: put it in the [model] table", source=source,
                                key=misplaced[0]))
        check_keys(values, [f.name for f in fields(cls)], source)
        check_field_types(cls, values, source)
        if model_cls is not None and isinstance(values.get("model"), dict):
            check_field_types(model_cls, values["model"], f"{source} [model]")


SCHEDULES = ("cosine", "inverse-sqrt")


@dataclass
class Seq2SeqTrainConfig(TrainConfig):
    """A :class:`TrainConfig` for ``attnlab train-seq2seq``; the fields below are new or have new defaults.

    The data is a generated task (``task = "dates"`` or ``"numbers"``, see :mod:`attnlab.data.tasks`) or a UTF-8
    TSV file of ``source<TAB>target`` lines (``data = "pairs.tsv"``): exactly one of the two. Model sizes are a
    preset of :class:`attnlab.models.TransformerConfig` (``transformer-tiny`` …) with overrides in ``model``. On
    top of the GPT trainer's settings: the paper's label smoothing and its warm-up + inverse-square-root
    learning-rate schedule, both optional.
    """

    task: str | None = "dates"            # a generated task (attnlab.data.TASKS), or None with ``data``
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

    ARCHS = names_of("seq2seq")

    def check_data(self) -> None:
        """A translation run reads a generated task or a TSV file: exactly one of ``task`` and ``data``."""
        if (self.task is None) == (self.data is None):
            raise ValueError(tr("task, data: give exactly one: a generated task (dates, numbers) or a TSV file of "
                                "source<TAB>target lines, got task={task!r}, data={data!r}",
                                task=self.task, data=self.data))

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.task is not None:
            expect_one_of("task", self.task, tuple(TASKS), tr)
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(tr("label_smoothing: expected in [0, 1), got {value!r}", value=self.label_smoothing))
        expect_one_of("schedule", self.schedule, SCHEDULES, tr)
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


def check_keys(values: dict[str, Any], known: list[str], source: str) -> None:
    """Raise ValueError for the first key of ``values`` not in ``known``, suggesting the closest."""
    for key in values:
        if key not in known:
            near = difflib.get_close_matches(key, known, n=1)
            hint = (tr("; did you mean {near!r}?", near=near[0]) if near
                    else tr("; known keys: {known}", known=", ".join(sorted(known))))
            raise ValueError(tr("{source}: unknown key {key!r}{hint}", source=source, key=key, hint=hint))


def load_toml(path: str | Path) -> dict[str, Any]:
    """The key/value pairs of a TOML config file (unchecked; see :meth:`TrainConfig.from_dict`)."""
    path = Path(path)
    text = read_text(path, "config")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ValueError(tr("config: {path!r} is not valid TOML: {err}", path=str(path), err=err)) from None
