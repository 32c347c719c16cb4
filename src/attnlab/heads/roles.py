"""BERT's head roles (Clark et al., 2019, "What Does BERT Look At? An Analysis of BERT's Attention", §3).

For every head, pooled over every real query row of every sentence ([CLS] and [SEP] rows included, padding left
out): the sum over those rows divided by their number, never a mean of per-sentence means, of

* ``cls``, ``sep``, ``punct``: the weight the query puts on [CLS], on [SEP], on tokens that are punctuation;
* ``prev``, ``next``, ``self``: the weight on the position right before the query (queries at position ≥ 1), right
  after it (queries before the last real token), and on itself;
* ``entropy``: the entropy of the query's row, in nats.

The paper measured BERT-base (12 × 12 heads) on 1000 Wikipedia segments of 128 tokens; attnlab runs the same
statistics on any BERT-family encoder it loads, by default all-MiniLM-L6-v2 on Shakespeare's sentences.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from attnlab.i18n import N_, tr

#: the statistics of a head, in the order the tables show them
ROLES = ("cls", "sep", "punct", "prev", "next", "self", "entropy")
#: each statistic as a table or a figure names it (the keys above stay the names of roles.json)
ROLE_NAMES = {"cls": "[CLS]", "sep": "[SEP]", "punct": N_("punctuation"), "prev": N_("previous"), "next": N_("next"),
              "self": N_("self"), "entropy": N_("entropy")}


def is_punctuation(token: str) -> bool:
    """A token made of punctuation alone (Unicode categories P*), a WordPiece continuation's ``##`` aside."""
    text = token.removeprefix("##")
    return bool(text) and all(unicodedata.category(c).startswith("P") for c in text)


@dataclass
class RoleSums:
    """Running sums of every statistic, ``(num_layers, num_heads)`` each, and the number of rows each was summed
    over (``prev`` and ``next`` over fewer rows than the others)."""

    sums: dict[str, Tensor] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)

    def add(self, role: str, value: Tensor, rows: int) -> None:
        self.sums[role] = self.sums.get(role, 0) + value.double()
        self.rows[role] = self.rows.get(role, 0) + rows

    def means(self) -> dict[str, Tensor]:
        """Each statistic's pooled mean, ``(num_layers, num_heads)``."""
        return {role: self.sums[role] / self.rows[role] for role in ROLES}


def add_batch(sums: RoleSums, attentions: Sequence[Tensor], attention_mask: Tensor, is_cls: Tensor, is_sep: Tensor,
              is_punct: Tensor) -> None:
    """Add one padded batch: per layer weights ``(B, H, T, T)``; ``attention_mask``, ``is_cls``, ``is_sep`` and
    ``is_punct`` ``(B, T)`` (1/True: a real token, [CLS], [SEP], punctuation). Right padding is assumed."""
    real = attention_mask.bool()
    rows = real[:, None, :]                                  # (B, 1, T): which query rows count
    prev_rows = (real[:, 1:] & real[:, :-1])[:, None, :]     # queries 1.. whose previous token is real
    next_rows = (real[:, :-1] & real[:, 1:])[:, None, :]     # queries ..T-2 whose next token is real
    targets = {"cls": is_cls, "sep": is_sep, "punct": is_punct}
    per_layer: dict[str, list[Tensor]] = {role: [] for role in ROLES}
    for a in attentions:
        a = a.double()
        for role, keys in targets.items():
            per_layer[role].append(((a * keys[:, None, None, :].double()).sum(-1) * rows).sum(dim=(0, 2)))
        per_layer["self"].append((a.diagonal(dim1=-2, dim2=-1) * rows).sum(dim=(0, 2)))
        per_layer["prev"].append((a.diagonal(offset=-1, dim1=-2, dim2=-1) * prev_rows).sum(dim=(0, 2)))
        per_layer["next"].append((a.diagonal(offset=1, dim1=-2, dim2=-1) * next_rows).sum(dim=(0, 2)))
        entropy = -torch.special.xlogy(a, a).sum(-1)         # 0 · log 0 = 0: masked keys add nothing
        per_layer["entropy"].append((entropy * rows).sum(dim=(0, 2)))
    counts = {"prev": int(prev_rows.sum()), "next": int(next_rows.sum())}
    for role in ROLES:
        sums.add(role, torch.stack(per_layer[role]), counts.get(role, int(rows.sum())))


def uniform_baseline(lengths: Sequence[int], punctuation: int = 0) -> dict[str, float]:
    """What a head spreading its weight evenly over an ``n``-token sentence would score, pooled as the roles are:
    ``1/n`` on [CLS], on [SEP] (one each per sentence), on itself and on each neighbour; entropy ``log n``; and on
    punctuation, the share of the tokens that are (``punctuation`` of them in all the sentences)."""
    rows = sum(lengths)
    neighbour = sum((n - 1) / n for n in lengths) / max(1, sum(n - 1 for n in lengths))
    entropy = sum(n * math.log(n) for n in lengths) / rows
    one = len(lengths) / rows  # Σ n · (1/n) over Σ n rows
    return {"cls": one, "sep": one, "punct": punctuation / rows, "self": one, "prev": neighbour, "next": neighbour,
            "entropy": entropy}


@torch.no_grad()
def head_roles(bert: Any, sentences: Sequence[str], batch_size: int = 32,
               on_batch: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Run ``bert`` (a :class:`~attnlab.pretrained.PretrainedBert`) over ``sentences`` and pool the roles.

    Returns ``{"layers": [[{role: value} per head] per layer], "sentences": N, "queries": rows, "uniform": …}``;
    ``on_batch(done, total)`` is called after each batch.
    """
    if not sentences:
        raise ValueError(tr("sentences: expected at least one sentence, got none"))
    vocab = bert.tokenizer.get_vocab()
    cls_id, sep_id = vocab.get("[CLS]"), vocab.get("[SEP]")
    if cls_id is None or sep_id is None:
        raise ValueError(tr("{model}: the tokenizer has no [CLS]/[SEP] tokens; head roles need a BERT-style tokenizer",
                            model=getattr(bert, "name", type(bert).__name__)))
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))  # similar lengths pad little
    sums, lengths, punctuation = RoleSums(), [], 0
    for start in range(0, len(order), batch_size):
        batch = bert.tokenize([sentences[i] for i in order[start:start + batch_size]])
        out = bert(batch.input_ids, batch.attention_mask, batch.token_type_ids, return_weights=True)
        punct = torch.tensor([[is_punctuation(t) for t in tokens] + [False] * (batch.input_ids.shape[1] - len(tokens))
                              for tokens in batch.tokens])
        add_batch(sums, out.attentions, batch.attention_mask, batch.input_ids == cls_id, batch.input_ids == sep_id,
                  punct)
        lengths += batch.attention_mask.sum(dim=1).tolist()
        punctuation += int(punct.sum())
        if on_batch is not None:
            on_batch(min(start + batch_size, len(order)), len(order))
    means = sums.means()
    layers = [[{role: round(float(means[role][layer, head]), 6) for role in ROLES}
               for head in range(means["cls"].shape[1])] for layer in range(means["cls"].shape[0])]
    return {"model": getattr(bert, "name", ""), "sentences": len(sentences), "queries": sums.rows["cls"],
            "mean_tokens": sum(lengths) / len(lengths), "uniform": uniform_baseline(lengths, punctuation),
            "layers": layers}
