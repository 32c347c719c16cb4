"""Decoding an encoder-decoder: greedy search and beam search (what a translation model does at test time).

The source is encoded once. The decoder then starts from ``bos_id`` and adds one token per step until every
sequence has produced ``eos_id`` (or ``max_new_tokens`` are reached). With ``use_cache=True`` each step feeds only
the newest token to :meth:`attnlab.models.Transformer.decode_step`: the decoder's self-attention keeps the keys and
values of the earlier ones in the cache, and the cross-attention's keys and values of the memory are computed once
per source, shared by its beams (:meth:`~attnlab.models.Transformer.new_cache`). Without the cache each step runs the
decoder over the whole prefix, the memory's keys and values projected again; the two give the same tokens (tested).

Beam search keeps the ``beam_size`` best partial translations per source, ranked by their log-probability divided
by the length penalty of GNMT (Wu et al., 2016), which the Transformer paper uses with α = 0.6 (§6.1):

    lp(Y) = ((5 + |Y|) / 6) ** α

Without it (α = 0) beam search prefers short translations: every token can only lower a log-probability.

Neither search ever emits ``pad_id`` or ``bos_id``. Both return ``(B, L)`` token ids, the ``eos_id`` included,
``pad_id`` after it; ``L`` is the longest result.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, overload

import torch
from torch import Tensor

from attnlab.fast import accelerated
from attnlab.fast.projections import fixed_weights
from attnlab.i18n import tr


@overload
def length_penalty(length: Tensor, alpha: float) -> Tensor: ...
@overload
def length_penalty(length: int, alpha: float) -> float: ...
def length_penalty(length: Tensor | int, alpha: float) -> Tensor | float:
    """GNMT's length penalty ``((5 + length) / 6) ** alpha``: 1 for one token, growing with length when α > 0."""
    return ((5 + length) / 6) ** alpha


def _check_source(model: Any, src: Tensor, src_mask: Tensor | None) -> Tensor:
    """Check the source once; return its ``(B, S)`` bool mask (1 = real)."""
    c = model.config
    if not isinstance(src, Tensor) or src.dim() != 2:
        got = tuple(src.shape) if isinstance(src, Tensor) else type(src).__name__
        raise ValueError(tr("src must be a (B, S) tensor of token ids, got {got}", got=got))
    if src.shape[1] == 0:
        raise ValueError(tr("src is empty (shape {shape}); give at least one token per source",
                            shape=tuple(src.shape)))
    if src.shape[1] > c.context_length:
        raise ValueError(tr("src has {n} tokens, more than the model's context_length={context_length}; shorten the "
                            "source", n=src.shape[1], context_length=c.context_length))
    if src_mask is not None and (not isinstance(src_mask, Tensor) or tuple(src_mask.shape) != tuple(src.shape)):
        got = tuple(src_mask.shape) if isinstance(src_mask, Tensor) else type(src_mask).__name__
        raise ValueError(tr("src_mask must have the shape of src {shape}, got {got}", shape=tuple(src.shape), got=got))
    mask = model.source_mask(src, src_mask)
    empty = (~mask.any(dim=1)).nonzero().flatten().tolist()  # the one read at this door
    if empty:
        raise ValueError(tr("src rows {rows} are empty (only padding); give at least one real token per source",
                            rows=empty))
    return mask


def _check_max_new_tokens(model: Any, max_new_tokens: int | None) -> int:
    ctx = model.config.context_length
    if max_new_tokens is None:
        return ctx
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or not 1 <= max_new_tokens <= ctx:
        raise ValueError(tr("max_new_tokens must be an int in [1, context_length={context_length}] (the decoder "
                            "reads bos + all but the last token), got {got!r}", context_length=ctx, got=max_new_tokens))
    return max_new_tokens


class _Stepper:
    """The decoder's next-token log-probabilities ``(N, V)`` for a growing ``tokens (N, t)`` (bos first), ``N = B ·
    beams`` rows grouped by source (at the first step one row per source, before :meth:`reorder` gives each source
    its beams), with or without the cache; pad and bos are never chosen.

    With the cache, each call feeds the newest token to :meth:`~attnlab.models.Transformer.decode_step`, whose
    cache keeps every layer's keys and values (and the memory's, projected once per source). Without it, each call
    runs :meth:`~attnlab.models.Transformer.decode` over the whole prefix, the memory repeated for the beams: the
    cross-attention's keys and values are projected again at every step.
    """

    def __init__(self, model: Any, src: Tensor, src_mask: Tensor | None, mask: Tensor, use_cache: bool,
                 max_new_tokens: int) -> None:
        self.model = model
        memory = model.encode(src, src_mask)  # the model's door checks the ids and the mask's values
        self.cache = model.new_cache(memory, mask, max_new_tokens) if use_cache else None  # one row per source
        if not use_cache:  # the cache holds the memory's keys and values: the memory itself is not kept
            self.memory, self.mask = memory, mask
        c = model.config
        self.banned = torch.tensor([c.pad_id, c.bos_id], device=src.device)

    def reorder(self, rows: Tensor) -> None:
        """Rows ``rows (N,)`` become rows ``0 .. N - 1``: a search's parents, each a row of the same source, or at
        its first step each source's row repeated for its beams. With the cache the memory's keys and values stay,
        one per source; without it the memory is repeated once, for the beams."""
        if self.cache is not None:
            self.cache.reorder(rows, memory=False)
        elif rows.shape[0] != self.memory.shape[0]:
            self.memory, self.mask = self.memory.index_select(0, rows), self.mask.index_select(0, rows)

    def log_probs(self, tokens: Tensor) -> Tensor:
        if self.cache is not None:
            logits = self.model.decode_step(tokens[:, -1:], self.cache)
        else:
            logits = self.model.decode(tokens, self.memory, src_mask=self.mask,
                                       tgt_mask=torch.ones_like(tokens))[:, -1]
        logits = logits.float().index_fill(-1, self.banned, float("-inf"))
        return logits.log_softmax(dim=-1)


@contextmanager
def _decoding(model: Any) -> Iterator[None]:
    """Eval mode, without autograd, the weights fixed (:func:`~attnlab.fast.projections.fixed_weights`), for the
    duration; the modules that were training train again after. Only the modules in training mode are switched:
    walking them all twice would cost as much as a decoding step."""
    training = [m for m in model.modules() if m.training]
    for m in training:
        m.training = False
    try:
        with torch.inference_mode(), fixed_weights():  # nothing but the search runs: its weights stay as they are
            yield
    finally:
        for m in training:
            m.training = True


def _start(model: Any, rows: int, device: torch.device) -> Tensor:
    return torch.full((rows, 1), model.config.bos_id, dtype=torch.long, device=device)


def greedy_decode(model: Any, src: Tensor, src_mask: Tensor | None = None, max_new_tokens: int | None = None,
                  use_cache: bool = True, *, accelerate: bool = True) -> Tensor:
    """The most probable next token at every step: ``src (B, S)`` -> ``(B, L)`` ids, ``L <= max_new_tokens``.

    Args:
        model: an :class:`attnlab.models.Transformer` (put in eval mode for the duration).
        src: source ids; ``src_mask (B, S)`` 1 = real (None: positions holding ``pad_id`` are padding).
        max_new_tokens: the most tokens per result (default and limit: the model's ``context_length``).
        use_cache: feed one token per step to the cached decoder (True), or the whole prefix (False).
        accelerate: run the model's fast twin (:func:`attnlab.fast.accelerated`: the same tokens, faster); False:
            the book's plain modules.
    """
    mask = _check_source(model, src, src_mask)
    limit = _check_max_new_tokens(model, max_new_tokens)
    c = model.config
    model = accelerated(model) if accelerate else model
    with _decoding(model):
        step = _Stepper(model, src, src_mask, mask, use_cache, limit)
        tokens = _start(model, src.shape[0], src.device)
        done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
        for _ in range(limit):
            nxt = step.log_probs(tokens).argmax(dim=-1)
            nxt = nxt.masked_fill(done, c.pad_id)
            tokens = torch.cat([tokens, nxt[:, None]], dim=1)
            done |= nxt == c.eos_id
            if bool(done.all()):
                break
    return tokens[:, 1:].clone()  # a plain tensor, not an inference-mode one: the caller may write to it


def beam_search(model: Any, src: Tensor, src_mask: Tensor | None = None, beam_size: int = 4, alpha: float = 0.6,
                max_new_tokens: int | None = None, use_cache: bool = True, *,
                accelerate: bool = True) -> tuple[Tensor, Tensor]:
    """The best of ``beam_size`` hypotheses per source: ``src (B, S)`` -> ``(tokens (B, L), scores (B,))``.

    A hypothesis's score is its log-probability (over the tokens that may be chosen: pad and bos left out of the
    softmax) divided by :func:`length_penalty` of its length (eos included);
    finished hypotheses keep their place in the beam, unchanged, while it still holds better ones. The search stops
    when every beam of every source has finished, or after ``max_new_tokens``. ``beam_size=1`` is greedy search.

    Args:
        model, src, src_mask, max_new_tokens, use_cache, accelerate: as in :func:`greedy_decode`.
        beam_size: hypotheses kept per source, >= 1 (the paper: 4).
        alpha: the length penalty's exponent, >= 0 (the paper: 0.6; 0: no penalty).
    """
    if isinstance(beam_size, bool) or not isinstance(beam_size, int) or beam_size < 1:
        raise ValueError(tr("beam_size must be an int >= 1, got {got!r}", got=beam_size))
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not alpha >= 0:
        raise ValueError(tr("alpha (the length penalty's exponent) must be a number >= 0, got {got!r}", got=alpha))
    mask = _check_source(model, src, src_mask)
    limit = _check_max_new_tokens(model, max_new_tokens)
    model = accelerated(model) if accelerate else model
    with _decoding(model):
        tokens, scores = _beam_search(model, src, src_mask, mask, beam_size, float(alpha), limit, use_cache)
    return tokens.clone(), scores.clone()  # plain tensors, not inference-mode ones: the caller may write to them


def _beam_search(model: Any, src: Tensor, src_mask: Tensor | None, mask: Tensor, k: int, alpha: float, limit: int,
                 use_cache: bool) -> tuple[Tensor, Tensor]:
    c, (b, _), device = model.config, src.shape, src.device
    step = _Stepper(model, src, src_mask, mask, use_cache, limit)  # source b's beams: rows b·k .. b·k + k-1
    tokens = _start(model, b * k, device)
    # log-probabilities so far (B, k); one live beam per source at first, so the first step does not pick k copies
    logp = torch.full((b, k), float("-inf"), device=device)
    logp[:, 0] = 0.0
    lengths = torch.zeros(b, k, device=device)  # generated tokens, eos included
    done = torch.zeros(b, k, dtype=torch.bool, device=device)
    offsets = (torch.arange(b, device=device) * k)[:, None]
    finished_row = None
    for t in range(1, limit + 1):
        # at the first step a source's beams are all its bos: its row alone is computed, (B, 1, V), broadcast
        rows_logp = step.log_probs(tokens if t > 1 else tokens[::k])  # (B·k, V), at first (B, V)
        step_logp, vocab = rows_logp.view(b, -1, rows_logp.shape[-1]), rows_logp.shape[-1]  # (B, k, V)
        if finished_row is None:  # a finished beam has one continuation, pad, which changes nothing
            finished_row = torch.full((vocab,), float("-inf"), device=device)
            finished_row[c.pad_id] = 0.0
        step_logp = torch.where(done[..., None], finished_row, step_logp)
        cand_logp = logp[..., None] + step_logp  # (B, k, V)
        cand_len = torch.where(done, lengths, torch.full_like(lengths, t))  # (B, k): each candidate's, by parent
        score = cand_logp / length_penalty(cand_len, alpha)[..., None]
        index = score.view(b, -1).topk(k, dim=-1).indices  # (B, k) among k·V candidates
        parent, token = index // vocab, index % vocab
        logp = cand_logp.view(b, -1).gather(1, index)
        lengths = cand_len.gather(1, parent)
        rows = (offsets + parent).flatten()  # the surviving parents' rows
        # a beam with probability 0 (more beams than tokens to choose) can never win: it stops too
        done = done.gather(1, parent) | (token == c.eos_id) | torch.isneginf(logp)
        tokens = torch.cat([tokens.index_select(0, rows), token.view(-1, 1)], dim=1)
        step.reorder(rows if t > 1 else rows // k)  # parents are beams of the same source; first, the source's row
        if bool(done.all()):
            break
    # the beams are sorted by score: the first of each source is its best
    final = (logp / length_penalty(lengths, alpha))[:, 0]
    longest = int(lengths[:, 0].max())  # other beams may have run longer: their columns are dropped
    return tokens.view(b, k, -1)[:, 0, 1 : longest + 1], final
