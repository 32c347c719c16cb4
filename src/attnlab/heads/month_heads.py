"""Which cross-attention heads carry the month: the dates translator (``attnlab demo dates``, ``attnlab
train-seq2seq --task dates``) with the month word of its source changed.

clean ``15 juillet 2031`` and corrupted ``15 août 2031`` (and the same day in the six other formats of the demo,
July against August), both decoded with the clean run's target ``<bos>2031-07-15`` (teacher forcing); the metric is
the logit of the month's digit ``7`` minus that of ``8`` where the decoder writes it, after ``2031-0``. The source
reaches the decoder only through its cross-attention, so patching every cross-attention head restores the clean
run; one head at a time, the heads that carry the month stand out, and their keys and values one source position
at a time say which characters they read it from.

The sources are padded with ``<pad>`` to one length (the translation model masks padding), so that a position
holds the same kind of thing in every row.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import torch
from torch import Tensor, nn

from attnlab.data.pairs import BOS, PAD
from attnlab.data.tasks import DateItem, get_task
from attnlab.heads.attribution import attribute_heads
from attnlab.heads.patching import Metric, baselines, listed, patch_heads, patch_residual, recovered

#: the held-out day of the demo, and the same day a month later
DAY, OTHER_DAY = dt.date(2031, 7, 15), dt.date(2031, 8, 15)
#: the demo's seven formats, French (the month word alone differs: "juillet" / "août") first
FORMATS = (("fr_FR", "long"), ("en_US", "full"), ("en_GB", "long"), ("de_DE", "full"), ("es_ES", "medium"),
           ("zh_CN", "full"), ("ja_JP", "full"))


def month_sources(formats=FORMATS, day: dt.date = DAY, other: dt.date = OTHER_DAY) -> tuple[list[str], list[str]]:
    """The clean and corrupted sources: ``day`` and ``other`` written in each format."""
    task = get_task("dates")
    return ([task.render(DateItem(day, *f)).source for f in formats],
            [task.render(DateItem(other, *f)).source for f in formats])


def month_pair(vocab: Any, clean_sources: list[str], corrupt_sources: list[str],
               day: dt.date = DAY) -> tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]:
    """``((source, target), (source, target))``: the sources padded to one length, the target ``<bos>`` + the clean
    ISO date in both."""
    rows = [vocab.encode(s).tolist() for s in (*clean_sources, *corrupt_sources)]
    width = max(map(len, rows))
    src = torch.full((len(rows), width), PAD, dtype=torch.long)
    for r, ids in enumerate(rows):
        src[r, : len(ids)] = torch.tensor(ids)
    target = torch.tensor([BOS, *vocab.encode(day.isoformat()).tolist()]).expand(len(clean_sources), -1)
    n = len(clean_sources)
    return (src[:n], target.clone()), (src[n:], target.clone())


def month_metric(vocab: Any, day: dt.date = DAY, other: dt.date = OTHER_DAY) -> tuple[Metric, int]:
    """The metric (logit of ``day``'s month digit minus ``other``'s, where they first differ) and that position."""
    a, b = day.isoformat(), other.isoformat()
    k = next(i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y)  # logits at k predict character k
    right, wrong = int(vocab.encode(a[k])[0]), int(vocab.encode(b[k])[0])

    def metric(logits: Tensor) -> Tensor:
        return (logits[:, k, right] - logits[:, k, wrong]).mean()

    return metric, k


def month_heads(model: nn.Module, vocab: Any) -> dict[str, Any]:
    """What ``patch_dates.json`` holds: for the French pair, and for all seven formats together, each cross-attention
    head's patch and attribution (fractions of the way from the corrupted metric to the clean one), the decoder's
    residual stream per target position, and the French pair's keys and values per source position."""
    metric, position = month_metric(vocab)
    clean_sources, corrupt_sources = month_sources()
    out: dict[str, Any] = {"position": position, "sources": clean_sources, "corrupted_sources": corrupt_sources}
    for name, rows in (("french", slice(0, 1)), ("seven_formats", slice(None))):
        clean, corrupt = month_pair(vocab, clean_sources[rows], corrupt_sources[rows])
        clean_value, corrupt_value = baselines(model, clean, corrupt, metric)
        heads = patch_heads(model, clean, corrupt, metric)
        estimate = attribute_heads(model, clean, corrupt, metric) + corrupt_value
        result = {"clean_metric": clean_value, "corrupt_metric": corrupt_value,
                  "patching": listed(recovered(heads, clean_value, corrupt_value)),
                  "attribution": listed(recovered(estimate, clean_value, corrupt_value)),
                  "residual_by_position": listed(recovered(patch_residual(model, clean, corrupt, metric),
                                                             clean_value, corrupt_value))}
        if name == "french":
            length = len(clean_sources[0])  # the clean source's own positions (no padding)
            for site in ("key", "value"):
                each = patch_heads(model, clean, corrupt, metric, positions="each", site=site)[..., :length]
                result[f"{site}_by_source_position"] = listed(recovered(each, clean_value, corrupt_value))
        out[name] = result
    return out
