"""What a tokenizer cannot read: the pieces of a text it maps to its unknown token (BERT's ``[UNK]``).

A WordPiece vocabulary such as all-MiniLM-L6-v2's holds a few thousand CJK characters, not all: ``我 爱 学习`` comes
out as ``[CLS] 我 [UNK] 学 [UNK] [SEP]``, and the attention drawn over ``[UNK]`` says nothing about 爱 or 习.
:func:`unknown_pieces` finds them, by the offsets the tokenizer gives each token, so that the command can say so.
Byte-level tokenizers (GPT-2's, Llama's) and attnlab's own have no unknown token: nothing is ever found there.
"""

from __future__ import annotations

from typing import Any


def unknown_token(tokenizer: Any) -> str | None:
    """The unknown token of a ``tokenizers`` tokenizer (or of attnlab's wrapper of one), None where it has none."""
    inner = getattr(tokenizer, "tokenizer", tokenizer)  # attnlab.pretrained.TextTokenizer wraps one
    model = getattr(inner, "model", None)
    if model is None and hasattr(inner, "_tokenizer"):  # tokenizers' BertWordPieceTokenizer, built from vocab.txt
        model = inner._tokenizer.model
    return getattr(model, "unk_token", None)


def unknown_pieces(tokenizer: Any, texts: list[str]) -> list[str]:
    """The pieces of ``texts`` (words, or single CJK characters) that ``tokenizer`` reads as its unknown token, each
    once, in the order met."""
    unk = unknown_token(tokenizer)
    if unk is None:
        return []
    inner = getattr(tokenizer, "tokenizer", tokenizer)
    found: dict[str, None] = {}
    for text in texts:
        encoding = inner.encode(text)
        for token, (start, end) in zip(encoding.tokens, encoding.offsets, strict=True):
            if token == unk and text[start:end].strip():
                found[text[start:end]] = None
    return list(found)
