"""Induction heads and their phase change (Olsson et al., 2022, "In-context Learning and Induction Heads").

An induction head completes ``… A B … A`` with ``B``: from the second ``A`` it attends to the token right after the
earlier ``A``, and copies it. It needs two layers: a head of layer 0 writes into each position which token came
before it, and the induction head of layer 1 matches its query (the current token) against that. Olsson et al.
saw such heads form suddenly during training, in a "phase change", at the very moment the models got better at
using their context; a one-layer model never forms them.

:func:`train_induction` trains a one-layer and a two-layer :class:`AttentionOnlyTransformer` (the same width, data,
steps and seed: a fixed number of steps, so every machine gets the same numbers) on
:func:`~attnlab.heads.repeated_tokens.repeated_span_batch` and measures, every ``eval_interval`` steps:

* each head's **prefix-matching score** (:func:`prefix_matching_scores`): on distinct random tokens whose second half
  repeats the first, the attention a token of the second half pays to the token right after its earlier
  occurrence, averaged over those tokens;
* the **in-context learning score** (:func:`icl_score`): the loss at a late token minus the loss at an early one,
  the paper's "500th − 50th token" scaled to the context (the ``T/10``-th and ten times later);
* the loss on the training data and on the repeated half.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.data.tokens import stream_generator
from attnlab.heads.attention_only import AttentionOnlyConfig, AttentionOnlyTransformer, check_positive_ints
from attnlab.heads.repeated_tokens import check_half, repeated_halves, repeated_span_batch
from attnlab.i18n import N_, made_from, tr
from attnlab.training.optim import configure_optimizer, lr_at

#: a model's name (``induction.json``'s keys: ``"2-layer"``), shown in the reader's language by :func:`shown_model`
MODEL_NAME = N_("{layers}-layer")


def shown_model(name: str) -> str:
    """A model's name (``"2-layer"``) as a line or a figure shows it."""
    return made_from(name, (MODEL_NAME,)) or name


#: a head "is an induction head" above this prefix-matching score (the finding: the two-layer model forms one)
INDUCTION_THRESHOLD = 0.5


def prefix_matching_scores(attentions: Sequence[Tensor], half: int) -> Tensor:
    """Per layer weights ``(B, H, 2·half, 2·half)`` on :func:`repeated_halves` sequences -> ``(L, H)`` scores in [0, 1].

    Query ``i`` of the second half (``half <= i < 2·half``) repeats token ``i - half``; the token right after that
    earlier occurrence sits at ``i - half + 1``. The score is the weight there, averaged over queries and sequences.
    """
    queries = torch.arange(half, 2 * half)
    keys = queries - half + 1
    for layer, a in enumerate(attentions):
        if a.dim() != 4 or a.shape[-1] != 2 * half or a.shape[-2] != 2 * half:
            raise ValueError(tr("attentions[{layer}] must be (B, H, {t}, {t}) for a repeated half of {half}, got "
                                "{shape}", layer=layer, t=2 * half, half=half, shape=tuple(a.shape)))
    return torch.stack([a[:, :, queries, keys].float().mean(dim=(0, 2)) for a in attentions]).cpu()


def icl_positions(context_length: int) -> tuple[int, int]:
    """The (0-based) early and late positions of the in-context learning score: the ``T/10``-th token and the token
    ten times later (the paper's 50th and 500th)."""
    early = context_length // 10
    if early < 1:
        raise ValueError(tr("the in-context learning score needs a context of at least 10 tokens, got "
                            "{context_length}", context_length=context_length))
    return early - 1, 10 * early - 1


def per_position_loss(logits: Tensor, targets: Tensor) -> Tensor:
    """``(B, T, V)``, ``(B, T)`` -> the mean cross-entropy at each position ``(T,)``."""
    return F.cross_entropy(logits.transpose(1, 2), targets, reduction="none").mean(dim=0)


def icl_score(losses: Tensor) -> float:
    """Loss at the late position minus loss at the early one (negative: later tokens are predicted better)."""
    early, late = icl_positions(losses.shape[0])
    return float(losses[late] - losses[early])


@dataclass(frozen=True)
class InductionConfig:
    """The induction experiment: one set of sizes, data and steps for both models."""

    vocab_size: int = 64
    context_length: int = 32
    d_model: int = 64
    num_heads: int = 4
    steps: int = 800                 # the two-layer model's phase change comes near step 450
    batch_size: int = 64
    learning_rate: float = 3e-3
    warmup_steps: int = 50
    eval_interval: int = 50
    eval_batch: int = 64
    seed: int = 0
    layers: tuple[int, ...] = (1, 2)
    min_span: int = 2                # repeated spans of 2 tokens already pay a head that looks one token back
    max_span: int = 8
    copies: int = 3                  # spans repeated per training sequence

    def __post_init__(self) -> None:
        check_positive_ints(self, ("steps", "batch_size", "eval_interval", "eval_batch", "copies"))
        if not self.learning_rate > 0:
            raise ValueError(tr("learning_rate must be > 0, got {value!r}", value=self.learning_rate))
        self.model_config(1)  # the sizes, checked once
        check_half(self.half, self.vocab_size, self.context_length)
        icl_positions(self.context_length)

    @property
    def half(self) -> int:
        """The repeated-half test's half: the whole context, split in two."""
        return self.context_length // 2

    def model_config(self, num_layers: int) -> AttentionOnlyConfig:
        return AttentionOnlyConfig(self.vocab_size, self.context_length, self.d_model, num_layers, self.num_heads)


@dataclass
class Evaluation:
    """One evaluation of a model during training."""

    step: int
    loss: float                      # mean loss on the fixed batch of training data
    repeated_loss: float             # mean loss on the repeated half (the tokens that can be copied)
    icl_score: float
    prefix_matching: list[list[float]]  # (num_layers, num_heads)

    @property
    def best(self) -> float:
        return max(max(row) for row in self.prefix_matching)


@dataclass
class InductionRun:
    """One model's run: the model (trained) and its evaluations, first to last."""

    model: AttentionOnlyTransformer
    history: list[Evaluation] = field(default_factory=list)
    snapshots: dict[int, dict[str, Tensor]] = field(default_factory=dict)  # step -> weights, if asked for

    def at_step(self, step: int) -> AttentionOnlyTransformer:
        """A copy of the model as it was at evaluation ``step`` (:func:`train_induction` with ``snapshots``)."""
        model = AttentionOnlyTransformer(self.model.config)
        model.load_state_dict(self.snapshots[step])
        return model.eval()

    @property
    def final(self) -> Evaluation:
        return self.history[-1]

    def phase_change_step(self) -> int | None:
        """The first evaluation at which some head's prefix-matching score exceeds :data:`INDUCTION_THRESHOLD`
        (None: never)."""
        return next((e.step for e in self.history if e.best > INDUCTION_THRESHOLD), None)

    def induction_head(self) -> tuple[int, int]:
        """``(layer, head)`` with the highest final prefix-matching score."""
        scores = torch.tensor(self.final.prefix_matching)
        flat = int(scores.argmax())
        return divmod(flat, scores.shape[1])

    def to_dict(self) -> dict[str, Any]:
        return {"prefix_matching": self.final.prefix_matching, "icl_score": self.final.icl_score,
                "loss": self.final.loss, "repeated_loss": self.final.repeated_loss,
                "phase_change_step": self.phase_change_step(), "induction_head": list(self.induction_head()),
                "history": [asdict(e) for e in self.history]}


def training_batch(config: InductionConfig, batch: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """``batch`` training sequences of the experiment: inputs and targets ``(B, T)``."""
    c = config
    return repeated_span_batch(batch, c.context_length, c.vocab_size, generator, c.min_span, c.max_span, c.copies)


class EvalData:
    """The fixed batches every evaluation uses: training data for the losses, repeated halves for the rest."""

    def __init__(self, config: InductionConfig) -> None:
        c = config
        self.inputs, self.targets = training_batch(c, c.eval_batch, stream_generator(c.seed, "induction", "eval"))
        self.halves = repeated_halves(c.eval_batch, c.half, c.vocab_size,
                                      stream_generator(c.seed, "induction", "eval", "halves"))

    @torch.no_grad()
    def evaluate(self, model: AttentionOnlyTransformer, step: int, half: int) -> Evaluation:
        model.eval()
        out = model(self.inputs)
        losses = per_position_loss(out.logits, self.targets)
        # The whole sequence, so that every query of the second half is a real one: its last token predicts nothing
        # here, but it attends (a padded zero row in its place would cap a perfect head at (half - 1) / half).
        seen = model(self.halves, return_weights=True)
        # the second half's tokens after its first: each is the token after an earlier occurrence of its predecessor
        repeated = per_position_loss(seen.logits[:, half:-1], self.halves[:, half + 1:]).mean()
        scores = prefix_matching_scores(seen.attentions, half)
        model.train()
        return Evaluation(step, float(losses.mean()), float(repeated), icl_score(losses),
                          [[round(float(s), 6) for s in row] for row in scores])


def train_model(config: InductionConfig, num_layers: int, eval_data: EvalData,
                on_eval: Callable[[str, Evaluation], None] | None = None, snapshots: bool = False) -> InductionRun:
    """Train one attention-only model of ``num_layers`` layers for ``config.steps`` steps, evaluating as it goes
    (and, with ``snapshots``, keeping a copy of the weights at every evaluation)."""
    c = config
    torch.manual_seed(c.seed)  # the same initial embeddings for every depth
    model = AttentionOnlyTransformer(c.model_config(num_layers))
    optimizer = configure_optimizer(model, c.learning_rate, 0.0, (0.9, 0.99))
    run, name = InductionRun(model), MODEL_NAME.format(layers=num_layers)

    def record(step: int) -> None:
        run.history.append(eval_data.evaluate(model, step, c.half))
        if snapshots:
            run.snapshots[step] = {k: v.detach().clone() for k, v in model.state_dict().items()}
        if on_eval is not None:
            on_eval(name, run.history[-1])

    record(0)
    model.train()
    for step in range(c.steps):
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, c.learning_rate, c.learning_rate, c.warmup_steps, c.steps)
        inputs, targets = training_batch(c, c.batch_size, stream_generator(c.seed, "induction", "train", step))
        loss = model(inputs, targets=targets).loss
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if (step + 1) % c.eval_interval == 0 or step + 1 == c.steps:
            record(step + 1)
    model.eval()
    return run


def train_induction(config: InductionConfig | None = None, on_eval: Callable[[str, Evaluation], None] | None = None,
                    snapshots: bool = False) -> dict[str, InductionRun]:
    """Both models of the experiment, trained: ``{"1-layer": run, "2-layer": run}`` (``config.layers``); with
    ``snapshots``, each run keeps its weights at every evaluation (:meth:`InductionRun.at_step`).

    On one thread: matrices this small gain nothing from a second (on a busy machine they lose much), and one thread
    sums in the same order on every machine.
    """
    config = config or InductionConfig()
    eval_data = EvalData(config)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return {MODEL_NAME.format(layers=n): train_model(config, n, eval_data, on_eval, snapshots)
                for n in config.layers}
    finally:
        torch.set_num_threads(threads)


def results(config: InductionConfig, runs: dict[str, InductionRun]) -> dict[str, Any]:
    """What ``induction.json`` holds: the configuration and, per model, its final scores and history."""
    early, late = icl_positions(config.context_length)
    return {"config": {**asdict(config), "layers": list(config.layers), "icl_positions": [early, late],
                       "induction_threshold": INDUCTION_THRESHOLD},
            "models": {name: run.to_dict() for name, run in runs.items()}}
