"""Training data: corpora, tokenizers and cached, memory-mapped token arrays."""

from attnlab.data.corpus import load_text, shakespeare_text, strip_play_markdown
from attnlab.data.tokenizer import (
    BPETokenizer,
    CharTokenizer,
    Tokenizer,
    load_tokenizer,
    save_tokenizer,
    tokenizer_from_json,
    train_tokenizer,
)
from attnlab.data.tokens import encode_cached, get_batch, stream_generator, train_val_split

__all__ = [
    "BPETokenizer",
    "CharTokenizer",
    "Tokenizer",
    "encode_cached",
    "get_batch",
    "load_text",
    "load_tokenizer",
    "save_tokenizer",
    "shakespeare_text",
    "stream_generator",
    "strip_play_markdown",
    "tokenizer_from_json",
    "train_tokenizer",
    "train_val_split",
]
