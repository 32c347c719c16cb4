"""The models an explorer serves: each given at launch, by name, with its tokenizer, its kind and the window of
tokens it reads.

A request names a model by the name it was given here, never by a path: the server opens no file after launch.

Kinds are :data:`attnlab.models.registry.Kind`'s: a ``decoder`` (GPT, the modern decoder, a Hugging Face causal
LM) continues the text, the ``encoder`` (the shipped all-MiniLM-L6-v2) reads it both ways between ``[CLS]`` and
``[SEP]``, a ``seq2seq`` model translates a source into a target.

What a model reads of a text: its tokens, at most :data:`MAX_TOKENS` (and no more than its positions). A decoder
reads the *last* ones (what :func:`~attnlab.generation.generate` keeps when it crops), an encoder and a source the
first ones (the tokenizer's truncation, ``attnlab translate --truncate``); the page says how many it left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

from attnlab.attention import MultiHeadAttention
from attnlab.i18n import tr
from attnlab.models.language_model import LanguageModel
from attnlab.models.registry import ARCHITECTURES

#: the most tokens of a text one request reads: every layer × head keeps a T × T matrix (MiniLM at 512 tokens:
#: 18.9 M weights); a longer text is cropped, and the page says so
MAX_TOKENS = 512
#: the text a page starts with, by kind (every character is in the shipped and the demo's tokenizers)
DEFAULT_TEXTS = {"decoder": "ROMEO:\nBut, soft! what light through yonder window breaks?",
                 "encoder": "The cat sat on the mat because it was tired.", "seq2seq": "15 juillet 2031"}
#: more starting texts, tried in turn when a model's tokenizer cannot read the one asked for (a translation model
#: of the numbers task reads digits alone)
FALLBACK_TEXTS = {"decoder": ("To be, or not to be", "the"), "encoder": (), "seq2seq": ("20000001", "1005")}
#: the names of the models that ship with attnlab (``attnlab explore --model NAME``)
SHIPPED = ("bert", "minilm")


@dataclass(frozen=True)
class Tokens:
    """What a model reads of a text: ``ids`` and their ``tokens`` (each the decoded string of one id), after
    ``dropped`` tokens left out (``side``: ``"start"`` or ``"end"`` of the text) of ``total``."""

    ids: tuple[int, ...]
    tokens: tuple[str, ...]
    total: int
    side: str = "start"

    @property
    def dropped(self) -> int:
        return self.total - len(self.ids)

    def crop_note(self) -> dict[str, Any] | None:
        """``{"kept", "of", "side"}`` when tokens were left out, else None (the API's ``cropped``)."""
        return None if not self.dropped else {"kept": len(self.ids), "of": self.total, "side": self.side}


@dataclass
class Entry:
    """One model the explorer serves: its ``name`` (what requests say), ``kind``, ``model`` (eval mode),
    ``tokenizer`` (a translation model's character vocabulary) and the ``text`` its page starts with."""

    name: str
    kind: str
    model: nn.Module
    tokenizer: Any
    text: str

    @property
    def config(self) -> Any:
        return self.model.config

    @property
    def num_layers(self) -> int:
        c = self.config
        return c.num_decoder_layers if self.kind == "seq2seq" else c.num_layers

    @property
    def num_heads(self) -> int:
        return self.config.num_heads

    def layers_in(self, mode: str) -> int:
        """The layers of one attention: a translation model's encoder has its own number of them."""
        return self.config.num_encoder_layers if mode == "encoder" else self.num_layers

    @property
    def patched(self) -> str | None:
        """The attention whose heads the page patches (:mod:`attnlab.heads.sites`): a decoder's ``self``, a
        translation model's ``cross``; None for the encoder, which predicts no next token."""
        return {"decoder": "self", "seq2seq": "cross"}.get(self.kind)

    @property
    def rotary(self) -> bool:
        return self.kind == "decoder" and bool(getattr(self.model, "ROTARY", False))

    @property
    def window(self) -> int:
        """The most tokens of a text this model reads (of the source, for a translation model)."""
        limit = getattr(self.model, "position_limit", None) if self.kind == "decoder" else None
        return min(MAX_TOKENS, limit or self.config.context_length)

    def attention_modules(self, mode: str = "self") -> list[MultiHeadAttention]:
        """Each layer's attention module, in forward order (``mode="cross"``: a translation model's
        cross-attention; ``"encoder"``/``"decoder"``: its two self-attentions)."""
        m: Any = self.model  # one of three model classes, told apart by kind
        if self.kind == "encoder":
            return [b.attn for b in m.encoder.blocks]
        if self.kind == "decoder":
            return [b.attn for b in m.blocks]
        if mode == "encoder":
            return [b.attn for b in m.encoder_blocks]
        return [b.cross_attn if mode == "cross" else b.self_attn for b in m.decoder_blocks]

    @property
    def sliding_window(self) -> int | None:
        """The widest sliding window of its layers (None: no layer has one)."""
        windows = [getattr(a, "sliding_window", None) for a in self.attention_modules()]
        return max((w for w in windows if w), default=None)

    def describe(self) -> dict[str, Any]:
        """``GET /api/models``' item: ``name`` and ``kind``, and what the page needs to lay itself out."""
        return {"name": self.name, "kind": self.kind, "layers": self.num_layers, "heads": self.num_heads,
                "window": self.window, "rotary": self.rotary, "sliding_window": self.sliding_window,
                "caches": self.caches(), "head_mask": True, "patch": self.patched,
                "encoder_layers": self.config.num_encoder_layers if self.kind == "seq2seq" else None,
                "text": self.text}

    def caches(self) -> list[str]:
        """The decoding caches the page can show: ``full`` (the model's own: growing, or rolling in a sliding-window
        layer) and ``sink`` (StreamingLLM's, rotary models without sliding-window layers of their own)."""
        if self.kind != "decoder":
            return []
        return ["full", "sink"] if self.rotary and self.sliding_window is None else ["full"]


def kind_of(model: nn.Module) -> str:
    """``decoder``, ``encoder`` or ``seq2seq``: the registry's kind of ``model``'s architecture (the shipped
    MiniLM is an encoder with its tokenizer around it)."""
    inner = getattr(model, "encoder", None)
    if isinstance(inner, nn.Module) and not hasattr(model, "decoder_blocks"):
        model = inner  # PretrainedBert: the encoder inside
    for row in ARCHITECTURES.values():
        if isinstance(model, row.model):
            return row.kind
    if isinstance(model, LanguageModel):
        return "decoder"
    raise TypeError(tr("explore: expected one of attnlab's models ({architectures}), got {model_type}",
                       architectures=", ".join(ARCHITECTURES), model_type=type(model).__name__))


def entry_for(model: nn.Module, tokenizer: Any = None, name: str | None = None, text: str | None = None) -> Entry:
    """An :class:`Entry` for a model in hand (``attnlab.explore.show`` and the tests): the shipped MiniLM
    carries its tokenizer; any other model needs ``tokenizer``."""
    kind = kind_of(model)
    tokenizer = getattr(model, "tokenizer", None) if tokenizer is None else tokenizer
    if tokenizer is None:
        raise TypeError(tr("explore: {model_type} needs its tokenizer (tokenizer=...), got None",
                           model_type=type(model).__name__))
    label = name or getattr(model, "name", None) or type(model).__name__
    return Entry(str(label), kind, model.eval(), tokenizer, starting_text(kind, tokenizer, text))


def starting_text(kind: str, tokenizer: Any, text: str | None) -> str:
    """``text`` if the tokenizer reads it, else the first of its kind's texts it reads (else its first characters):
    one ``--text`` serves models of several kinds and vocabularies."""
    for candidate in (text, DEFAULT_TEXTS[kind], *FALLBACK_TEXTS[kind]):
        if candidate:
            try:
                tokenizer.encode(candidate)
            except (ValueError, KeyError):
                continue
            return candidate
    return "".join(getattr(tokenizer, "chars", ())[:12]) or DEFAULT_TEXTS[kind]


def load_entries(checkpoints: Sequence[str] = (), model_dirs: Sequence[str] = (), shipped: Sequence[str] = (),
                 text: str | None = None) -> list[Entry]:
    """Every model given at launch, loaded before the server starts: ``checkpoints`` (directories ``attnlab
    train`` or ``train-seq2seq`` wrote, or ``attnlab export``'s file), ``model_dirs`` (Hugging Face model
    directories) and ``shipped`` names (:data:`SHIPPED`). One that does not load is a ValueError naming it."""
    from attnlab.models.checkpoint import load_trained

    entries: list[Entry] = []
    for path in checkpoints:
        model, tokenizer = _loading(path, lambda p: load_trained(Path(p), "cpu"))
        entries.append(entry_for(model, tokenizer, _label(path), text))
    for path in model_dirs:
        from attnlab.pretrained import load_causal_lm

        model, tokenizer = _loading(path, lambda p: load_causal_lm(Path(p), device="cpu"))
        entries.append(entry_for(model, tokenizer, _label(path), text))
    for name in shipped:
        if name not in SHIPPED:
            raise ValueError(tr("--model: expected one of {choices}, got {name!r}", choices=", ".join(SHIPPED),
                                name=name))
        from attnlab.pretrained import load_bert

        entries.append(entry_for(load_bert(), name="all-MiniLM-L6-v2", text=text))
    return unique_names(entries)


def _loading(path: str, load: Any) -> tuple[nn.Module, Any]:
    """``load(path)``, its failure one line that names ``path``."""
    try:
        return load(path)
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ValueError(tr("{path}: cannot be explored: {err}", path=path, err=err)) from None


def _label(path: str) -> str:
    return Path(path).resolve().name or str(path)


def unique_names(entries: list[Entry]) -> list[Entry]:
    """The same name twice (two runs called ``out``) becomes ``out``, ``out (2)``: requests name one model."""
    seen: dict[str, int] = {}
    for entry in entries:
        count = seen.get(entry.name, 0) + 1
        seen[entry.name] = count
        if count > 1:
            entry.name = f"{entry.name} ({count})"
    return entries
