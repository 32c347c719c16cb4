"""Parallel data for translation: (source, target) pairs, read from TSV, split, encoded and batched.

* :class:`Pair`: one ``(source, target)`` example. :func:`read_pairs` reads a UTF-8 file of
  ``source<TAB>target`` lines; every malformed line is an error naming ``file:line``.
* :func:`split_pairs`: a seeded train/held-out split by *source*, so no held-out source is ever
  trained on (a file may give one source several targets; all of them land on the same side).
* the vocabulary: a :class:`~attnlab.data.CharTokenizer` of both sides (``CharTokenizer.from_pairs``), because
  the encoder-decoder model ties its source and target embeddings. Ids ``0, 1, 2`` are ``<pad>``, ``<bos>``,
  ``<eos>``; the characters follow, by code point.
* :func:`encode_pairs`, :func:`collate`, :func:`iter_batches`: ids, padded with ``<pad>`` = 0 into a
  :class:`Batch`, shuffled (optionally bucketed by length) from a ``torch.Generator``.
"""

from __future__ import annotations

import codecs
import random
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

import torch
from torch import Tensor

from attnlab.arguments import check_positive_int
from attnlab.data.tokenizer import SPECIALS, CharTokenizer, clip
from attnlab.files import atomic_write_text, read_bytes
from attnlab.i18n import N_, _, tr

PAD, BOS, EOS = (SPECIALS.index(name) for name in ("<pad>", "<bos>", "<eos>"))


class Pair(NamedTuple):
    """One translation example. A NamedTuple so it unpacks (``for src, tgt in pairs``) and hashes by value."""

    source: str
    target: str


# ---------------------------------------------------------------- TSV files


def read_pairs(path: str | Path) -> list[Pair]:
    """The pairs of a UTF-8 file of ``source<TAB>target`` lines, in file order.

    Text is kept exactly (no stripping: spaces are characters to a character-level model). A
    leading UTF-8 byte-order mark and ``\\r\\n`` line ends are accepted; empty lines are skipped.
    Raises ValueError for bytes that are not UTF-8 (their offset and line, said as every reader of
    :mod:`attnlab.files` says it), and ``"<file>:<line>: ..."`` for a line with no tab or more than one, an
    empty (or all-whitespace) side, and a file with no pairs at all.
    """
    data = read_bytes(path, "data")
    skip = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        text = data[skip:].decode("utf-8")
    except UnicodeDecodeError as err:
        offset = skip + err.start
        line_number = data[:offset].count(b"\n") + 1
        raise ValueError(tr("data: {path!r} is not UTF-8 text (byte 0x{byte:02x} at offset {offset}, line {line}); "
                            "give a UTF-8 text file", path=str(path), byte=data[offset], offset=offset,
                            line=line_number)) from None
    pairs = []
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if line:
            pairs.append(_parse_line(line, path, number))
    if not pairs:
        raise ValueError(tr("{path}: empty file: expected source<TAB>target lines, found none", path=path))
    return pairs


def _parse_line(line: str, path: str | Path, number: int) -> Pair:
    tabs = line.count("\t")
    if tabs != 1:
        found = "no tab" if tabs == 0 else f"{tabs} tabs"
        raise ValueError(tr("{path}:{number}: expected source<TAB>target (exactly one tab), found {found} in {clip!r}",
                            path=path, number=number, found=found, clip=clip(line)))
    source, target = line.split("\t")
    for side, value in ((N_("source"), source), (N_("target"), target)):
        if not value.strip():
            raise ValueError(tr("{path}:{number}: the {side} is empty (or only whitespace) in {clip!r}", path=path,
                                number=number, side=_(side), clip=clip(line)))
    return Pair(source, target)


def write_pairs(pairs: Iterable[Pair], path: str | Path) -> Path:
    """Write ``pairs`` as ``source<TAB>target`` lines (UTF-8, atomically); :func:`read_pairs` reads them back."""
    lines = []
    for i, (source, target) in enumerate(pairs):
        for side, value in ((N_("source"), source), (N_("target"), target)):
            if not value.strip() or any(c in value for c in "\t\r\n"):
                raise ValueError(tr("write_pairs: pair {i} has a {side} that is empty or holds a tab or line break: "
                                    "{clip!r}", i=i, side=_(side), clip=clip(value)))
        lines.append(f"{source}\t{target}\n")
    return atomic_write_text(path, "".join(lines))


# ---------------------------------------------------------------- split


def split_pairs(pairs: Sequence[Pair], held_out_fraction: float = 0.1,
                seed: int = 0) -> tuple[list[Pair], list[Pair]]:
    """``(train, held_out)``: a seeded ``held_out_fraction`` of the distinct *sources*, with all their pairs.

    Why by source: a held-out sentence whose source the model trained on (with another target)
    measures memory, not translation. Each part keeps the file order. The same pairs and seed give
    the same split on any machine (``random.Random`` seeded with an int).
    """
    if not 0.0 < held_out_fraction < 1.0:
        raise ValueError(tr("split_pairs: held_out_fraction must be in (0, 1), got {held_out_fraction!r}",
                            held_out_fraction=held_out_fraction))
    sources = list(dict.fromkeys(p.source for p in pairs))  # distinct, in first-seen order
    if len(sources) < 2:
        raise ValueError(tr("split_pairs: need at least 2 distinct sources to split, got {n_sources}",
                            n_sources=len(sources)))
    random.Random(seed).shuffle(sources)
    n_held = min(max(1, round(held_out_fraction * len(sources))), len(sources) - 1)
    held = set(sources[:n_held])
    return [p for p in pairs if p.source not in held], [p for p in pairs if p.source in held]


# ---------------------------------------------------------------- batches


class Batch(NamedTuple):
    """Padded ids, all ``int64``; the masks are ``attention_mask``-style: 1 = real token, 0 = padding.

    ``tgt_in = [<bos>, y_1 .. y_n]`` is what the decoder reads and ``tgt_out = [y_1 .. y_n, <eos>]``
    what it must predict: the same sequence shifted by one. ``tgt_mask`` covers both (they have the
    same real length, ``n + 1``).
    """

    src_ids: Tensor   # (B, S)
    src_mask: Tensor  # (B, S)
    tgt_in: Tensor    # (B, T)
    tgt_out: Tensor   # (B, T)
    tgt_mask: Tensor  # (B, T)

    def to(self, device: torch.device | str) -> Batch:
        return Batch(*(t.to(device) for t in self))


EncodedPair = tuple[list[int], list[int]]


def encode_pairs(pairs: Sequence[Pair], vocab: CharTokenizer, context_length: int | None = None,
                 truncate: bool = False) -> list[EncodedPair]:
    """Each pair as ``(source ids, target ids)``, checked against ``context_length``.

    A source longer than ``context_length`` is an error unless ``truncate=True`` cuts it. A target
    must fit as ``<bos> + target`` (``len + 1 <= context_length``) and is never cut: a cut target
    would teach the model to stop mid-translation.
    """
    if context_length is not None and (isinstance(context_length, bool) or not isinstance(context_length, int)
                                       or context_length < 2):
        raise ValueError(tr("encode_pairs: context_length must be an int >= 2 or None, got {context_length!r}",
                            context_length=context_length))
    out = []
    for i, (source, target) in enumerate(pairs):
        if not source:
            raise ValueError(tr("encode_pairs: pair {i} has an empty source (the encoder would read nothing)", i=i))
        src, tgt = vocab.encode(source).tolist(), vocab.encode(target).tolist()
        if context_length is not None:
            if len(src) > context_length:
                if not truncate:
                    raise ValueError(tr("encode_pairs: pair {i} has a source of {n_src} characters, more than "
                                        "context_length={context_length} ({clip!r}); pass truncate=True to cut "
                                        "sources, or raise context_length", i=i, n_src=len(src),
                                        context_length=context_length, clip=clip(source)))
                src = src[:context_length]
            if len(tgt) + 1 > context_length:
                raise ValueError(tr("encode_pairs: pair {i} has a target of {n_tgt} characters, which with <bos> "
                                    "exceeds context_length={context_length} ({clip!r}); targets are never truncated",
                                    i=i, n_tgt=len(tgt), context_length=context_length, clip=clip(target)))
        out.append((src, tgt))
    return out


def collate(encoded: Sequence[EncodedPair]) -> Batch:
    """Pad ``encoded`` pairs into one :class:`Batch`: ``S`` = the longest source, ``T`` = the longest target + 1."""
    if not encoded:
        raise ValueError(tr("collate: no pairs to batch"))
    s_len = max(len(src) for src, _ in encoded)
    t_len = max(len(tgt) for _, tgt in encoded) + 1
    src_ids, src_mask = (torch.full((len(encoded), s_len), PAD, dtype=torch.long) for _ in range(2))
    tgt_in, tgt_out, tgt_mask = (torch.full((len(encoded), t_len), PAD, dtype=torch.long) for _ in range(3))
    for row, (src, tgt) in enumerate(encoded):
        src_ids[row, : len(src)] = torch.tensor(src, dtype=torch.long)
        src_mask[row, : len(src)] = 1
        tgt_in[row, : len(tgt) + 1] = torch.tensor([BOS, *tgt], dtype=torch.long)
        tgt_out[row, : len(tgt) + 1] = torch.tensor([*tgt, EOS], dtype=torch.long)
        tgt_mask[row, : len(tgt) + 1] = 1
    return Batch(src_ids, src_mask, tgt_in, tgt_out, tgt_mask)


def iter_batches(encoded: Sequence[EncodedPair], batch_size: int, generator: torch.Generator | int, *,
                 bucket_by_length: bool = False, drop_last: bool = False) -> Iterator[Batch]:
    """One epoch of shuffled batches; the same ``generator`` state (or int seed) gives the same batches.

    ``bucket_by_length``: group pairs of similar length into a batch (less padding, so less wasted
    compute); the order of the batches is still shuffled. For one stream per epoch use
    ``stream_generator(seed, "train", epoch)``.
    """
    check_positive_int("iter_batches", "batch_size", batch_size, tr)
    if not encoded:
        raise ValueError(tr("iter_batches: no pairs to batch"))
    if isinstance(generator, int):
        generator = torch.Generator().manual_seed(generator)
    order = torch.randperm(len(encoded), generator=generator).tolist()
    if bucket_by_length:
        # a stable sort of the shuffled order: equal lengths stay in random order
        order.sort(key=lambda i: (len(encoded[i][0]), len(encoded[i][1])))
    chunks = [order[i: i + batch_size] for i in range(0, len(order), batch_size)]
    if drop_last and len(chunks[-1]) < batch_size:
        chunks.pop()
    if bucket_by_length:
        chunks = [chunks[i] for i in torch.randperm(len(chunks), generator=generator).tolist()]
    for chunk in chunks:
        yield collate([encoded[i] for i in chunk])
