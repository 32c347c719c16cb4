"""Tokenizers: characters (ours) and byte-level BPE (trained with the ``tokenizers`` library).

Both map text to integer ids and back, and save to / load from one JSON file, which the trainer
keeps beside each checkpoint so that ``attnlab sample`` reads text the way training did.

* :class:`CharTokenizer`: one id per distinct character of the corpus, sorted by code point.
  Small vocabulary, long sequences; a character never seen in training cannot be encoded.
* :class:`BPETokenizer`: byte-level BPE. Text is first turned into bytes, so *any* string
  round-trips exactly (``decode(encode(s)) == s``); frequent byte pairs are merged until the
  vocabulary reaches ``vocab_size``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Protocol

import numpy as np

from attnlab.files import atomic_write_text, json_kind, read_text
from attnlab.i18n import tr


class Tokenizer(Protocol):
    kind: str

    @property
    def vocab_size(self) -> int: ...
    def encode(self, text: str) -> np.ndarray: ...
    def decode(self, ids) -> str: ...
    def to_json(self) -> str: ...


class CharTokenizer:
    """Character-level tokenizer: id ``i`` is the ``i``-th distinct character, by code point."""

    kind = "char"

    def __init__(self, chars: list[str] | str) -> None:
        chars = list(chars)
        if not chars or any(len(c) != 1 for c in chars) or len(set(chars)) != len(chars):
            raise ValueError(tr("CharTokenizer: chars must be a non-empty list of distinct single characters"))
        self.chars = sorted(chars)
        self._codes = np.array([ord(c) for c in self.chars], dtype=np.uint32)

    @classmethod
    def train(cls, text: str) -> CharTokenizer:
        """The vocabulary of ``text``: every distinct character in it."""
        if not text:
            raise ValueError(tr("CharTokenizer.train: text is empty"))
        return cls(sorted(set(text)))

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> np.ndarray:
        """``text`` -> ids ``(len(text),)`` int64. Unknown characters raise a ValueError naming them."""
        codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
        ids = np.searchsorted(self._codes, codes)
        ok = (ids < len(self._codes)) & (self._codes[np.minimum(ids, len(self._codes) - 1)] == codes)
        if not ok.all():
            unknown = sorted({chr(c) for c in codes[~ok]})
            shown = ", ".join(repr(c) for c in unknown[:10]) + (" ..." if len(unknown) > 10 else "")
            raise ValueError(tr("CharTokenizer.encode: {n_unknown} character(s) not in the vocabulary: {shown} (the "
                                "tokenizer knows {vocab_size} characters, those of its training text)",
                                n_unknown=len(unknown), shown=shown, vocab_size=self.vocab_size))
        return ids.astype(np.int64)

    def decode(self, ids) -> str:
        return "".join(self.chars[int(i)] for i in ids)

    def to_json(self) -> str:
        return json.dumps({"kind": self.kind, "chars": self.chars}, ensure_ascii=False)


class BPETokenizer:
    """Byte-level BPE, a thin wrapper over :class:`tokenizers.Tokenizer`."""

    kind = "bpe"

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer

    @classmethod
    def train(cls, text: str, vocab_size: int) -> BPETokenizer:
        """Learn ``vocab_size`` tokens (the 256 byte tokens included) from ``text``."""
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

        if not 256 < vocab_size <= 2**31:
            raise ValueError(tr("BPETokenizer.train: vocab_size must be > 256 (the byte alphabet), got {vocab_size}",
                                vocab_size=vocab_size))
        if not text:
            raise ValueError(tr("BPETokenizer.train: text is empty"))
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                      show_progress=False)
        tok.train_from_iterator(_chunks(text), trainer=trainer)
        return cls(tok)

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    def encode(self, text: str) -> np.ndarray:
        # Encoded in line-aligned chunks, in parallel; byte-level BPE is lossless whatever the split.
        pieces = self.tokenizer.encode_batch(list(_chunks(text)))
        ids = [np.asarray(p.ids, dtype=np.int64) for p in pieces]
        return np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64)

    def decode(self, ids) -> str:
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=False)

    def to_json(self) -> str:
        return self.tokenizer.to_str()


def _chunks(text: str, size: int = 1 << 16):
    """``text`` cut into pieces of about ``size`` characters, each ending at a newline when possible."""
    start = 0
    while start < len(text):
        end = text.find("\n", start + size)
        end = len(text) if end < 0 else end + 1
        yield text[start:end]
        start = end


def train_tokenizer(kind: str, text: str, vocab_size: int | None = None) -> Tokenizer:
    """A ``"char"`` or ``"bpe"`` tokenizer trained on ``text`` (``vocab_size`` is for BPE only)."""
    if kind == "char":
        return CharTokenizer.train(text)
    if kind == "bpe":
        return BPETokenizer.train(text, vocab_size if vocab_size is not None else 4096)
    raise ValueError(tr("tokenizer: expected 'char' or 'bpe', got {kind!r}", kind=kind))


def tokenizer_from_json(data: str, source: str = "tokenizer") -> Tokenizer:
    """Rebuild a tokenizer from :meth:`to_json` output (ours for char, the library's for BPE).

    Data that is not such a tokenizer (truncated, edited, another file) is a ValueError naming ``source``.
    """
    try:
        obj = json.loads(data)
    except json.JSONDecodeError as err:
        raise ValueError(tr("{source}: not valid JSON ({err}); the file is truncated or damaged", source=source,
                            err=err)) from None
    if not isinstance(obj, dict):
        raise ValueError(tr("{source}: holds a JSON {found}, expected a JSON object (a tokenizer)", source=source,
                            found=json_kind(obj)))
    try:
        if obj.get("kind") == "char":
            return CharTokenizer(obj["chars"])
        if obj.get("kind") == "char-pairs":  # a translation model's vocabulary (attnlab train-seq2seq)
            from attnlab.data.pairs import CharVocab

            return CharVocab.from_json(data)
        from tokenizers import Tokenizer as HFTokenizer

        return BPETokenizer(HFTokenizer.from_str(data))
    except Exception as err:  # the tokenizers' own errors name neither the file nor what to do
        raise ValueError(tr("{source}: not a tokenizer attnlab can read ({err_type}: {err}); the file is damaged",
                            source=source, err_type=type(err).__name__, err=err)) from None


def save_tokenizer(tokenizer: Tokenizer, path: str | Path) -> None:
    atomic_write_text(path, tokenizer.to_json())


def load_tokenizer(path: str | Path) -> Tokenizer:
    """The tokenizer saved in ``path``; a missing or damaged file is a ValueError naming it."""
    return tokenizer_from_json(read_text(path, "tokenizer"), source=str(path))
