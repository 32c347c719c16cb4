"""Text in, text out: translate sources with an encoder-decoder and its character vocabulary.

:func:`translate` checks each source (empty, characters the vocabulary lacks, longer than the model's
context), pads them into one batch, decodes greedily (``beam=1``) or with beam search
(:mod:`attnlab.generation.seq2seq`, caches on) and reads the ids back as text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from attnlab.data.pairs import PAD
from attnlab.data.tokenizer import CharTokenizer
from attnlab.generation.seq2seq import beam_search, greedy_decode
from attnlab.i18n import tr

if TYPE_CHECKING:  # attnlab.models imports this package
    from attnlab.models import Transformer


@dataclass
class Translation:
    """One source, its translation, the ids the decoder wrote (``<eos>`` excluded) and, with beam search, the
    hypothesis' length-penalised log-probability."""

    source: str
    target: str
    ids: list[int]
    score: float | None = None


def encode_sources(texts: Sequence[str], vocab: CharTokenizer, context_length: int,
                   truncate: bool = False) -> tuple[Tensor, Tensor]:
    """``(src_ids, src_mask)``, both ``(B, S)`` int64, padded with ``<pad>``; every source checked first."""
    if isinstance(texts, str) or not texts:
        raise ValueError(tr("text: expected one or more sources to translate, got {value!r}", value=texts))
    rows = []
    for i, text in enumerate(texts):
        if not text.strip():
            raise ValueError(tr("text: source {i} is empty (got {text!r}); give the text to translate",
                                i=i + 1, text=text))
        ids = vocab.encode(text)
        if len(ids) > context_length:
            if not truncate:
                raise ValueError(tr("text: source {i} has {n} characters, more than the model's context_length="
                                    "{context_length} ({text!r}); shorten it, or pass --truncate to cut it",
                                    i=i + 1, n=len(ids), context_length=context_length, text=text[:40]))
            ids = ids[:context_length]
        rows.append(ids)
    width = max(map(len, rows))
    src = torch.full((len(rows), width), PAD, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for r, ids in enumerate(rows):
        src[r, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        mask[r, : len(ids)] = 1
    return src, mask


def _strip(ids: list[int], bos: int, eos: int) -> list[int]:
    """The written tokens: no leading ``<bos>``, nothing from the first ``<eos>`` on, no padding."""
    if ids and ids[0] == bos:
        ids = ids[1:]
    if eos in ids:
        ids = ids[: ids.index(eos)]
    return [i for i in ids if i != PAD]


@torch.no_grad()
def translate(model: Transformer, vocab: CharTokenizer, texts: Sequence[str], *, beam: int = 1, alpha: float = 0.6,
              truncate: bool = False, max_new_tokens: int | None = None,
              accelerate: bool = True) -> list[Translation]:
    """Translate ``texts`` with ``model`` (a :class:`~attnlab.models.Transformer`); one :class:`Translation` each.

    ``beam=1`` is greedy decoding; ``beam > 1`` is beam search with the length penalty ``alpha``. ``accelerate``:
    the model's fast twin runs (the same tokens); False: the book's plain modules.
    """
    if isinstance(beam, bool) or not isinstance(beam, int) or beam < 1:
        raise ValueError(tr("beam: expected a positive integer (1 = greedy), got {beam!r}", beam=beam))
    if not alpha >= 0:
        raise ValueError(tr("alpha: expected a length penalty >= 0, got {alpha!r}", alpha=alpha))
    writable = vocab.vocab_size - 2  # every token but <pad> and <bos>: more beams than that would be empty
    if beam > writable:
        raise ValueError(tr("beam: expected at most {writable}, the tokens the decoder can write (the vocabulary "
                            "less <pad> and <bos>), got {beam}", writable=writable, beam=beam))
    config = model.config
    src, mask = encode_sources(texts, vocab, config.context_length, truncate)
    device = next(model.parameters()).device
    src, mask = src.to(device), mask.to(device)
    model.eval()
    scores: list[float | None] = [None] * len(texts)
    if beam == 1:
        tokens = greedy_decode(model, src, src_mask=mask, max_new_tokens=max_new_tokens, accelerate=accelerate)
    else:
        tokens, beam_scores = beam_search(model, src, src_mask=mask, beam_size=beam, alpha=alpha,
                                          max_new_tokens=max_new_tokens, accelerate=accelerate)
        scores = [float(s) for s in beam_scores.reshape(len(texts), -1)[:, 0]]
    out = []
    for text, row, score in zip(texts, tokens, scores, strict=True):
        ids = _strip([int(i) for i in row.reshape(-1).tolist()], config.bos_id, config.eos_id)
        out.append(Translation(text, vocab.decode(ids), ids, score))
    return out
