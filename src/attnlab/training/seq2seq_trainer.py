"""Training an encoder-decoder :class:`attnlab.models.Transformer` on translation pairs, with :class:`Trainer`'s loop.

Only what differs from next-token prediction is here, in the trainer's hooks: the data (a generated task or a
TSV file, one character vocabulary for both sides), the model (a ``TransformerConfig`` preset), the batches
(pairs drawn with the step's generator, padded), the loss (cross-entropy on the target tokens, label smoothing
while training) and the learning-rate schedule (optionally the paper's). The loop, checkpoints, exact resume,
the time budget, Ctrl-C and torchrun are :class:`Trainer`'s.

The training pairs of a generated task are drawn once, before the clock starts (``train_pairs`` of them,
from the run's seed), so a step costs the model's time only; rendering dates with babel takes about
0.1 ms a pair. Validation pairs are held-out ones: never in any training stream.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from rich.console import Console
from torch import Tensor, nn

from attnlab.data import SPECIALS, CharTokenizer, encode_pairs, get_task, read_pairs, split_pairs
from attnlab.data.pairs import BOS, EOS, PAD, Batch, EncodedPair, collate
from attnlab.i18n import tr
from attnlab.memory import check_fits
from attnlab.models.checkpoint import Checkpoint
from attnlab.training.config import Seq2SeqTrainConfig
from attnlab.training.model_config import build_model_config
from attnlab.training.optim import inverse_sqrt_lr
from attnlab.training.trainer import Trainer, TrainResult


def load_pairs(config: Seq2SeqTrainConfig, vocab: CharTokenizer | None):
    """``(vocab, train pairs, validation pairs)``; the vocabulary is built unless resuming gave one."""
    if config.task is not None:
        # two Python strings a pair at the least (49 bytes each, empty): a count that cannot fit is refused
        check_fits(100 * (config.train_pairs + config.val_pairs), tr("{n:,} generated pairs",
                                                                      n=config.train_pairs + config.val_pairs),
                   "train_pairs, val_pairs")
        task = get_task(config.task)
        train, val = task(config.train_pairs, config.seed), task.held_out(config.val_pairs, config.seed)
        return vocab or CharTokenizer(task.alphabet(), SPECIALS), train, val
    assert config.data is not None  # Seq2SeqTrainConfig takes a task or a file, exactly one
    pairs = read_pairs(config.data)
    try:
        train, val = split_pairs(pairs, config.val_fraction, config.seed)
    except ValueError as err:  # too few distinct sources to hold some out: name the file
        raise ValueError(tr("data: {path!r}: {err}", path=str(config.data), err=err)) from None
    return vocab or CharTokenizer.from_pairs(pairs), train, val


class Seq2SeqTrainer(Trainer):
    """:class:`Trainer` for source → target pairs (see the module's docstring); ``config`` is a
    :class:`Seq2SeqTrainConfig`."""

    config: Seq2SeqTrainConfig

    def _prepare_data(self, ckpt: Checkpoint | None):
        vocab = None if ckpt is None else ckpt.tokenizer
        if vocab is not None and (not isinstance(vocab, CharTokenizer) or vocab.specials != SPECIALS):
            assert ckpt is not None  # the vocabulary came from it
            raise ValueError(tr("resume: the checkpoint in {path!r} is not a translation model's (its tokenizer is "
                                "{kind!r})", path=str(ckpt.path), kind=repr(vocab)))
        vocab, train, val = load_pairs(self.config, vocab)
        self._step_tokens = 0
        return vocab, train, val  # encoded in _build_model_config, once the context length is known

    def _build_model_config(self):
        # the vocabulary decides the size and the special ids: a run may not override them
        config = build_model_config(self.config, self.tokenizer.vocab_size, pad_id=PAD, bos_id=BOS, eos_id=EOS)
        n = config.context_length
        self.train_data: list[EncodedPair] = encode_pairs(self.train_data, self.tokenizer, n, self.config.truncate)
        self.val_data: list[EncodedPair] = encode_pairs(self.val_data, self.tokenizer, n, self.config.truncate)
        return config

    def learning_rate_at(self, step: int) -> float:
        c = self.config
        if c.schedule == "inverse-sqrt":
            return inverse_sqrt_lr(step, c.learning_rate, c.warmup_iters)
        return super().learning_rate_at(step)

    def schedule_shape(self) -> str:
        if self.config.schedule == "inverse-sqrt":
            return tr("the paper's schedule (warm-up {warmup}, then 1/sqrt(step)): no end to fit",
                      warmup=self.config.warmup_iters)
        return super().schedule_shape()

    @property
    def tokens_per_step(self) -> int:
        """Real (not padding) source and target tokens of the last step's training batches."""
        return self._step_tokens

    def train_step(self) -> float:
        self._step_tokens = 0
        return super().train_step()

    def draw_batch(self, split: str, generator: torch.Generator) -> Batch:
        """``batch_size`` pairs drawn (with replacement) by ``generator``, padded, on this process' device."""
        data = self.train_data if split == "train" else self.val_data
        rows = torch.randint(len(data), (self.config.batch_size,), generator=generator).tolist()
        batch = collate([data[i] for i in rows])
        if split == "train":
            self._step_tokens += int(batch.src_mask.sum() + batch.tgt_mask.sum())
        return batch.to(self.dist.device)

    def compute_loss(self, model: nn.Module, batch: tuple[Tensor, ...]) -> Tensor:
        """Mean cross-entropy over the real target tokens; label smoothing only while training."""
        b = batch
        assert isinstance(b, Batch)  # what draw_batch makes here
        smoothing = self.config.label_smoothing if model.training else 0.0
        return model(b.src_ids, b.tgt_in, src_mask=b.src_mask, tgt_mask=b.tgt_mask, targets=b.tgt_out,
                     label_smoothing=smoothing).loss


def train_seq2seq(config: Seq2SeqTrainConfig, resume: bool = False, console: Console | None = None,
                  quiet: bool = False, stop_at: int | None = None, overwrite: bool = False,
                  on_save: Callable[[Trainer], None] | None = None) -> TrainResult:
    """Train an encoder-decoder Transformer as ``config`` says (see :class:`Seq2SeqTrainer`)."""
    with torch.enable_grad():
        return Seq2SeqTrainer(config, resume=resume, console=console, quiet=quiet, overwrite=overwrite,
                              on_save=on_save).train(stop_at)
