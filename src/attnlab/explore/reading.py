"""One reading of a text: the model's own forward pass, once, with weights returned, and what the page shows of it.

Every number comes from the model's ``forward``: a decoder's ``model(idx, targets=..., return_weights=True,
head_mask=...)`` gives the attention of every layer × head, the logits of the next token and the loss on the text;
the encoder's gives its attention and the sentence embedding; a translation model's ``model(src, tgt,
return_weights=True)`` its three attentions (encoder, decoder, cross), the next target token and the loss on the
target so far. Nothing is recomputed another way.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from attnlab.data.pairs import BOS
from attnlab.explore.entry import Entry, Tokens
from attnlab.i18n import tr
from attnlab.inspect.capture import same_heads
from attnlab.models import Seq2SeqHeadMask, sentence_embedding

#: the positions a decoder's loss leaves out (the last one has no next token to be scored on)
IGNORE = -100
#: a translation model's three attentions, as the page and the API name them (``Seq2SeqHeadMask``'s fields)
SEQ2SEQ_MODES = ("encoder", "decoder", "cross")


@dataclass
class Reading:
    """What one forward pass gave (batch of one, float32 on the CPU).

    Attributes:
        tokens: what the model read (a translation model's source).
        attentions: per layer ``(H, T, T)``: the self-attention of a decoder or the encoder (a translation model's
            encoder).
        logits: ``(vocab_size,)`` the next token's scores (None for the encoder).
        loss: the mean next-token cross-entropy on the text (a translation model's target so far); None when there
            is nothing to score.
        target: a translation model's target tokens, ``<bos>`` first; its ``decoder`` ``(H, T, T)`` and ``cross``
            ``(H, T, S)`` attentions per layer.
        embedding: the encoder's sentence embedding ``(D,)`` (mean pooled, L2-normalised).
    """

    tokens: Tokens
    attentions: list[Tensor]
    logits: Tensor | None = None
    loss: float | None = None
    target: Tokens | None = None
    decoder: list[Tensor] | None = None
    cross: list[Tensor] | None = None
    embedding: Tensor | None = None

    def maps(self, mode: str) -> list[Tensor]:
        """Per layer ``(H, Tq, Tk)`` of one attention: ``self`` (or ``encoder``), ``decoder`` or ``cross``."""
        found = {"self": self.attentions, "encoder": self.attentions, "decoder": self.decoder,
                 "cross": self.cross}.get(mode)
        if found is None:
            raise ValueError(tr("mode: expected {choices}, got {mode!r}", choices=", ".join(self.modes()),
                                mode=mode))
        return found

    def next_logits(self) -> Tensor:
        """``(vocab_size,)``: the next token's scores; an encoder's reading has none."""
        if self.logits is None:
            raise ValueError(tr("this model predicts no next token (an encoder): its reading has no logits"))
        return self.logits

    def modes(self) -> list[str]:
        return list(SEQ2SEQ_MODES) if self.cross is not None else ["self"]


def token_text(tokenizer, i: int) -> str:
    """The decoded string of token ``i``; a special token, which decodes to nothing, by its own spelling."""
    try:
        text = tokenizer.decode([i], skip_special_tokens=False)  # tokenizers.Tokenizer (MiniLM's)
    except TypeError:
        text = tokenizer.decode([i])
    if text:
        return text
    specials = getattr(tokenizer, "specials", ())
    if 0 <= i < len(specials):
        return specials[i]
    spell = getattr(tokenizer, "id_to_token", None)
    return str(spell(i)) if spell is not None else ""


def encoded_ids(tokenizer, text: str, what: str) -> list[int]:
    """The ids ``tokenizer`` makes of ``text``; one it cannot read is a ValueError naming ``what``."""
    try:
        encoded = tokenizer.encode(text)
    except ValueError as err:
        raise ValueError(tr("{what}: {err}", what=what, err=err)) from None
    return [int(i) for i in getattr(encoded, "ids", encoded)]


def read_tokens(entry: Entry, text: str, what: str = "text") -> Tokens:
    """The tokens ``entry``'s model reads of ``text`` (see :mod:`attnlab.explore.entry`: a decoder's last ones,
    otherwise the first ones)."""
    ids = encoded_ids(entry.tokenizer, text, what)
    if not ids:
        raise ValueError(tr("{what}: the tokenizer made no token of it; type some text", what=what))
    limit, side = entry.window, "start" if entry.kind == "decoder" else "end"
    kept = ids[-limit:] if side == "start" else ids[:limit]
    if entry.kind == "encoder" and len(ids) > limit:
        kept = ids[: limit - 1] + ids[-1:]  # [SEP] stays last, as the tokenizer's truncation keeps it
    return Tokens(tuple(kept), tuple(token_text(entry.tokenizer, i) for i in kept), len(ids), side)


def target_tokens(entry: Entry, target: str) -> Tokens:
    """A translation model's decoder input: ``<bos>`` and the target so far (cut to the model's positions)."""
    ids = encoded_ids(entry.tokenizer, target, "target") if target else []
    kept = [BOS, *ids[: entry.config.context_length - 1]]
    return Tokens(tuple(kept), tuple(token_text(entry.tokenizer, i) for i in kept), len(ids) + 1, "end")


def head_mask(entry: Entry, off: frozenset[tuple[str, int, int]]) -> Tensor | Seq2SeqHeadMask | None:
    """The model's ``head_mask`` with a 0 at every ``(attention, layer, head)`` in ``off`` (None when none is off):
    ``(num_layers, num_heads)`` for a decoder or an encoder (its attention ``self``), a :class:`Seq2SeqHeadMask`
    of the attentions named for a translation model."""
    if not off:
        return None
    masks = {mode: torch.ones(entry.layers_in(mode), entry.num_heads) for mode, _, _ in off}
    for mode, layer, head in off:
        masks[mode][layer, head] = 0.0
    return Seq2SeqHeadMask(**masks) if entry.kind == "seq2seq" else masks["self"]


def _first(maps) -> list[Tensor]:
    """The first sequence's maps, every layer on one grid of heads (:func:`~attnlab.inspect.capture.same_heads`)."""
    return same_heads([m[0].detach().float().cpu() for m in maps])


@torch.no_grad()
def read(entry: Entry, text: str, target: str | None = None,
         off: frozenset[tuple[str, int, int]] = frozenset()) -> Reading:
    """Run ``entry``'s model once on ``text`` (a translation model: the source, and ``target`` so far) with the
    heads in ``off``, ``(attention, layer, head)`` each, switched off (``head_mask``)."""
    tokens = read_tokens(entry, text, "text" if entry.kind != "seq2seq" else "source")
    model, mask = entry.model, head_mask(entry, off)
    idx = torch.tensor([tokens.ids])
    if entry.kind == "decoder":
        targets = torch.cat([idx[:, 1:], torch.full((1, 1), IGNORE)], dim=1) if idx.shape[1] > 1 else None
        out = model(idx, targets=targets, return_weights=True, head_mask=mask)
        loss = None if out.loss is None else float(out.loss)
        return Reading(tokens, _first(out.attentions), out.logits[0, -1].float(), loss)
    if entry.kind == "encoder":
        out = model(idx, return_weights=True, head_mask=mask)
        return Reading(tokens, _first(out.attentions), embedding=sentence_embedding(out.last_hidden_state, None)[0])
    tgt = target_tokens(entry, target or "")
    out = model(idx, torch.tensor([tgt.ids]), return_weights=True, head_mask=mask)
    written = torch.tensor(tgt.ids[1:])
    loss = float(F.cross_entropy(out.logits[0, :-1].float(), written)) if len(written) else None
    return Reading(tokens, _first(out.encoder_attentions), out.logits[0, -1].float(), loss, tgt,
                   _first(out.decoder_attentions), _first(out.cross_attentions))
