"""Tokenizers: characters (ours) and byte-level BPE (trained with the ``tokenizers`` library).

Both map text to integer ids and back, and save to / load from one JSON file, which the trainer
keeps beside each checkpoint so that ``attnlab sample`` reads text the way training did.

* :class:`CharTokenizer`: one id per distinct character of the corpus, sorted by code point (after the special
  tokens a translation model needs). Small vocabulary, long sequences; a character never seen cannot be encoded.
* :class:`BPETokenizer`: byte-level BPE. Text is first turned into bytes, so *any* string
  round-trips exactly (``decode(encode(s)) == s``); frequent byte pairs are merged until the
  vocabulary reaches ``vocab_size``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from attnlab.arguments import expect_one_of
from attnlab.files import atomic_write_text, json_kind, read_text
from attnlab.i18n import tr


class Tokenizer(Protocol):
    kind: str

    @property
    def vocab_size(self) -> int: ...
    def encode(self, text: str) -> np.ndarray: ...
    def decode(self, ids) -> str: ...
    def to_json(self) -> str: ...


#: a translation vocabulary's special tokens, ids 0, 1, 2: padding, the decoder's first input, the end of a target
SPECIALS = ("<pad>", "<bos>", "<eos>")


class CharTokenizer:
    """Characters -> ids: the ``specials`` first, then each distinct character, by code point.

    A GPT's is trained on its corpus (:meth:`train`) and has no specials; a translation model's is built from both
    sides of its pairs (:meth:`from_texts`, :meth:`from_pairs`) with :data:`SPECIALS`, because the encoder-decoder
    ties its source and target embeddings. There is no ``<unk>``: a character it lacks is an error that lists it,
    never a silent stand-in.
    """

    kind = "char"

    def __init__(self, chars: Iterable[str], specials: Sequence[str] = ()) -> None:
        chars = list(chars)
        if not chars or any(not isinstance(c, str) or len(c) != 1 for c in chars) or len(set(chars)) != len(chars):
            raise ValueError(tr("CharTokenizer: chars must be a non-empty list of distinct single characters"))
        self.chars, self.specials = sorted(chars), tuple(specials)
        self._codes = np.array([ord(c) for c in self.chars], dtype=np.uint32)
        self._eos = self.specials.index("<eos>") if "<eos>" in self.specials else None

    @classmethod
    def train(cls, text: str) -> CharTokenizer:
        """The vocabulary of ``text``: every distinct character in it."""
        if not text:
            raise ValueError(tr("CharTokenizer.train: text is empty"))
        return cls(sorted(set(text)))

    @classmethod
    def from_texts(cls, texts: Iterable[str], specials: Sequence[str] = SPECIALS) -> CharTokenizer:
        """Every character that occurs in ``texts``, after ``specials`` (a translation model's, by default)."""
        chars = set().union(*map(set, texts))
        if not chars:
            raise ValueError(tr("CharTokenizer.from_texts: the texts hold no characters"))
        return cls(chars, specials)

    @classmethod
    def from_pairs(cls, pairs: Iterable[Sequence[str]]) -> CharTokenizer:
        """Every character of every source and target of ``(source, target)`` pairs, after :data:`SPECIALS`."""
        return cls.from_texts(side for pair in pairs for side in pair)

    @property
    def vocab_size(self) -> int:
        return len(self.specials) + len(self.chars)

    def encode(self, text: str) -> np.ndarray:
        """``text`` -> ids ``(len(text),)`` int64, one per character (no specials added). Unknown characters raise
        a ValueError naming them."""
        codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
        ids = np.searchsorted(self._codes, codes)
        ok = (ids < len(self._codes)) & (self._codes[np.minimum(ids, len(self._codes) - 1)] == codes)
        if not ok.all():
            unknown = sorted({chr(c) for c in codes[~ok]})
            shown = ", ".join(repr(c) for c in unknown[:10]) + (" ..." if len(unknown) > 10 else "")
            raise ValueError(tr("CharTokenizer.encode: {n_unknown} character(s) not in the vocabulary: {shown} in "
                                "{clip!r} (the tokenizer knows {vocab_size} characters, those of the texts it was "
                                "built from)", n_unknown=len(unknown), shown=shown, clip=clip(text),
                                vocab_size=len(self.chars)))
        return ids.astype(np.int64) + len(self.specials)

    def decode(self, ids: Iterable[int]) -> str:
        """Ids -> text, reading a model's output as is: the specials are not text, ``<eos>`` ends it (the others
        are skipped)."""
        out, first = [], len(self.specials)
        for i in ids:
            i = int(i)
            if i == self._eos:
                break
            if not 0 <= i < self.vocab_size:
                raise ValueError(tr("CharTokenizer.decode: id {i} is outside the vocabulary [0, {vocab_size})", i=i,
                                    vocab_size=self.vocab_size))
            if i >= first:
                out.append(self.chars[i - first])
        return "".join(out)

    def to_json(self) -> str:
        specials = {"specials": list(self.specials)} if self.specials else {}
        return json.dumps({"kind": self.kind, **specials, "chars": self.chars}, ensure_ascii=False)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CharTokenizer) and (self.chars, self.specials) == (other.chars, other.specials)

    def __hash__(self) -> int:
        return hash((tuple(self.chars), self.specials))

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size}, specials={self.specials})"


def clip(text: str, width: int = 60) -> str:
    """``text`` cut to ``width`` characters for an error message."""
    return text if len(text) <= width else text[:width] + "..."


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


#: the kinds of tokenizer a language model trains with (``--tokenizer``, a training config's ``tokenizer``)
TOKENIZERS: tuple[str, ...] = (CharTokenizer.kind, BPETokenizer.kind)


def train_tokenizer(kind: str, text: str, vocab_size: int | None = None) -> Tokenizer:
    """A tokenizer of one of the :data:`TOKENIZERS` kinds trained on ``text`` (``vocab_size`` is for BPE only)."""
    expect_one_of("tokenizer", kind, TOKENIZERS, tr)
    if kind == BPETokenizer.kind:
        return BPETokenizer.train(text, vocab_size if vocab_size is not None else 4096)
    return CharTokenizer.train(text)


def tokenizer_from_json(data: str, source: str = "tokenizer") -> Tokenizer:
    """Rebuild a tokenizer from :meth:`to_json` output (ours for characters, the library's for BPE).

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
        # "char-pairs": how translation vocabularies were saved before one class served both
        if obj.get("kind") in (CharTokenizer.kind, "char-pairs"):
            return CharTokenizer(obj["chars"], obj.get("specials", ()))
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
