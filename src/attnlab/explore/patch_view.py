"""Activation patching in the explorer: a head of the clean run put into the corrupted run, and what the model then
predicts. Every number is :mod:`attnlab.heads`' own (``baselines``, ``run_patched``, ``patch_heads``,
``recovered``); nothing here patches.

The two runs read the text (clean) and the corrupted text as the page reads a text (a decoder's last tokens; a
translation model's source, with the same target so far). They must be as many tokens long: patching puts a head's
output at each position into the other run at the same position. The heads are those :mod:`attnlab.heads.sites`
patches: a decoder's self-attention, a translation model's cross-attention (where its decoder reads the source).

The metric is a logit difference at the last position, the next token: ``logit(right) − logit(wrong)``, by default
the clean run's most likely next token against the corrupted run's (its most likely other than ``right`` where the
two agree). Without a corrupted text, :func:`redrawn` proposes one: the first half of the tokens redrawn, as
``attnlab heads patch induction`` breaks its repeats.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from attnlab.explore.entry import Entry, Tokens
from attnlab.explore.next_token import Sampling, probabilities, top_tokens
from attnlab.explore.reading import Reading, encoded_ids, token_text
from attnlab.heads import Patch, baselines, patch_heads, recovered, run_patched
from attnlab.i18n import tr

#: draws per position before :func:`redrawn` gives up on a token that does not stay one token once written out
TRIES = 32


@dataclass
class LogitDifference:
    """The metric: ``logits (B, T, V)`` -> ``logit(right) − logit(wrong)`` at the last position, the batch's mean
    (0-d). It keeps the last position's logits ``(V,)`` of the run it scored last (``last``), so the bars of a
    patched run are those of the very pass patching made."""

    right: int
    wrong: int
    last: Tensor = field(default_factory=lambda: torch.empty(0))

    def __call__(self, logits: Tensor) -> Tensor:
        self.last = logits[0, -1].detach().float()
        return (logits[:, -1, self.right] - logits[:, -1, self.wrong]).mean()


def inputs(run: Reading) -> Tensor | tuple[Tensor, Tensor]:
    """What patching reads of a run: a decoder's ids ``(1, T)``; a translation model's ``(source, target)``."""
    ids = torch.tensor([run.tokens.ids])
    return ids if run.target is None else (ids, torch.tensor([run.target.ids]))


def check_lengths(clean: Reading, corrupt: Reading, what: str) -> None:
    """Both runs as many tokens long (patching swaps activations position by position)."""
    n, m = len(clean.tokens.ids), len(corrupt.tokens.ids)
    if n != m:
        raise ValueError(tr("corrupt: the {what} reads as {n} tokens and the corrupted one as {m}; patching puts a "
                            "head's output at each position into the other run, so both need the same number of "
                            "tokens", what=what, n=n, m=m))


def answer_tokens(entry: Entry, clean: Reading, corrupt: Reading, right: int | None,
                  wrong: int | None) -> LogitDifference:
    """The metric's two tokens: those given, else the clean run's most likely next token and the corrupted run's
    most likely other than it."""
    right = int(clean.next_logits().argmax()) if right is None else right
    if wrong is None:
        order = torch.sort(corrupt.next_logits(), descending=True, stable=True).indices
        wrong = int(order[1] if int(order[0]) == right else order[0])
    if right == wrong:
        raise ValueError(tr("right and wrong are the same token {token!r}: their logit difference is 0 whatever is "
                            "patched; choose two tokens", token=token_text(entry.tokenizer, right)))
    return LogitDifference(right, wrong)


def _share(values: Tensor, clean: float, corrupted: float) -> list | float | None:
    """:func:`attnlab.heads.recovered` as JSON: None where it is undefined (the two runs score alike)."""
    if clean == corrupted:
        return None
    shares = recovered(values, clean, corrupted)
    return float(shares) if shares.dim() == 0 else [[x if math.isfinite(x) else None for x in row]
                                                    for row in shares.tolist()]


def patch_view(entry: Entry, clean: Reading, corrupt: Reading, metric: LogitDifference, head: tuple[int, int] | None,
               every: bool, sampling: Sampling, top: int) -> dict[str, Any]:
    """``POST /api/patch``'s numbers: the metric of both runs, that of ``head`` patched (with the patched run's next
    tokens) and, with ``every``, :func:`~attnlab.heads.patch_heads`' layer × head map (docs/explore.md)."""
    model, names = entry.model, lambda i: token_text(entry.tokenizer, i)
    a, b = inputs(clean), inputs(corrupt)
    clean_value, corrupt_value = baselines(model, a, b, metric)

    def bars(logits: Tensor) -> list[dict[str, Any]]:
        return top_tokens(probabilities(logits, sampling), names, top)

    out: dict[str, Any] = {
        "right": {"id": metric.right, "token": names(metric.right)},
        "wrong": {"id": metric.wrong, "token": names(metric.wrong)},
        "clean": {"metric": clean_value, "next_tokens": bars(clean.next_logits())},
        "corrupted": {"metric": corrupt_value, "next_tokens": bars(corrupt.next_logits())}}
    if head is not None:
        value = run_patched(model, a, b, metric, [Patch(*head)])
        out["patched"] = {"layer": head[0], "head": head[1], "metric": float(value),
                          "recovered": _share(value, clean_value, corrupt_value),
                          "next_tokens": bars(metric.last)}
    if every:
        values = patch_heads(model, a, b, metric)
        out["heads"] = {"metric": values.tolist(), "recovered": _share(values, clean_value, corrupt_value)}
    return out


def redrawn(entry: Entry, tokens: Tokens) -> str:
    """A corrupted text for ``tokens``: the first half of them redrawn from the vocabulary's other tokens (those the
    second half does not hold, no special one), each kept only where the text written out reads as the same tokens
    again; the same text always gets the same draw (seed 0)."""
    ids, tokenizer = list(tokens.ids), entry.tokenizer
    half = len(ids) // 2
    if half == 0:
        raise ValueError(tr("corrupt: a text of one token has no first half to redraw; type a corrupted text"))
    first = len(getattr(tokenizer, "specials", ()))
    pool = torch.tensor(sorted(set(range(first, entry.config.vocab_size)) - set(ids[half:])) or [ids[0]])
    g = torch.Generator().manual_seed(0)

    def reads_as(candidate: list[int]) -> bool:
        try:
            return encoded_ids(tokenizer, tokenizer.decode(candidate), "corrupt") == candidate
        except (ValueError, KeyError):
            return False

    drawn: list[int] = []
    for _ in range(half):
        for pick in pool[torch.randint(len(pool), (TRIES,), generator=g)].tolist():
            if reads_as([*drawn, pick]):
                drawn.append(pick)
                break
        else:
            break
    if len(drawn) < half or not reads_as(drawn + ids[half:]):
        raise ValueError(tr("corrupt: no corrupted text of the same {n} tokens could be drawn for this text (its "
                            "tokens merge once written out); type one", n=len(ids)))
    return tokenizer.decode(drawn + ids[half:])

