"""Data on which copying pays: random tokens, with a span repeated somewhere later.

Random tokens cannot be predicted from the tokens before them, except where a span repeats: from its second token
on, the repeat can be read off the first occurrence ("… A B … A → B"), which is what an induction head does. The
span's length and both of its places are drawn at random for every sequence, so no fixed offset (a head that looks
a set number of tokens back) can stand in for looking the token up.

:func:`repeated_halves` is the test of Olsson et al. (2022): distinct random tokens whose second half repeats the
first, on which the prefix-matching score and the loss of the repeat are measured.
"""

from __future__ import annotations

import torch
from torch import Tensor

from attnlab.i18n import tr


def repeated_span_batch(batch: int, context_length: int, vocab_size: int, generator: torch.Generator,
                        min_span: int = 4, max_span: int | None = None, copies: int = 2) -> tuple[Tensor, Tensor]:
    """``batch`` sequences of ``context_length + 1`` uniform random tokens into which ``copies`` spans are copied;
    returns inputs and next-token targets, ``(B, T)`` each.

    Each copy: a span of length ``m`` in ``[min_span, max_span]`` (default ``max_span``: a quarter of the sequence),
    an offset ``d`` between the two occurrences uniform in ``[m, T + 1 - m]``, the first occurrence anywhere it fits.
    The offset is uniform so that no distance is a better guess than another (a later copy may overwrite part of
    an earlier one: a few repeats are then broken, which only adds noise).
    """
    n = context_length + 1
    max_span = n // 4 if max_span is None else max_span
    if max_span < min_span:
        raise ValueError(tr("context_length must be at least {value} for spans of {min_span} tokens repeated, got "
                            "{context_length}", value=4 * min_span - 1, min_span=min_span,
                            context_length=context_length))
    tokens = torch.randint(vocab_size, (batch, n), generator=generator)
    draws = torch.rand(batch, copies, 3, generator=generator).tolist()
    for row, row_draws in enumerate(draws):
        for u, v, w in row_draws:
            m = min_span + int(u * (max_span - min_span + 1))
            d = m + int(v * (n - 2 * m + 1))              # m .. n - m
            first = int(w * (n - m - d + 1))              # 0 .. n - m - d
            tokens[row, first + d:first + d + m] = tokens[row, first:first + m]
    return tokens[:, :-1], tokens[:, 1:]


def check_half(half: int, vocab_size: int, context_length: int) -> None:
    """A repeated-half test of ``2 · half`` tokens must fit the context and draw ``half`` distinct tokens."""
    if isinstance(half, bool) or not isinstance(half, int) or half < 2:
        raise ValueError(tr("the repeated-half test needs sequences of at least 4 tokens (a half of 2 or more), got "
                            "a half of {half!r}", half=half))
    if 2 * half > context_length:
        raise ValueError(tr("the repeated-half test's sequence of 2 × {half} tokens is longer than context_length="
                            "{context_length}", half=half, context_length=context_length))
    if half > vocab_size:
        raise ValueError(tr("the repeated-half test draws {half} distinct tokens, but the vocabulary has only "
                            "{vocab_size}", half=half, vocab_size=vocab_size))


def repeated_halves(batch: int, half: int, vocab_size: int, generator: torch.Generator) -> Tensor:
    """``(B, 2 · half)``: ``half`` distinct random tokens, then the same ``half`` tokens again.

    Distinct, so that every token of the second half has exactly one earlier occurrence to look back at.
    """
    first = torch.stack([torch.randperm(vocab_size, generator=generator)[:half] for _ in range(batch)])
    return torch.cat([first, first], dim=1)
