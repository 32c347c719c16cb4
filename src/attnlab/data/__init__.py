"""Training data: corpora, tokenizers, cached token arrays, and parallel pairs for translation."""

from attnlab.data.corpus import load_text, shakespeare_text, strip_play_markdown
from attnlab.data.pairs import (
    Batch,
    Pair,
    collate,
    encode_pairs,
    iter_batches,
    read_pairs,
    split_pairs,
    write_pairs,
)
from attnlab.data.tasks import TASKS, DatesTask, NumbersTask, Task, get_task
from attnlab.data.tokenizer import (
    SPECIALS,
    TOKENIZERS,
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
    "SPECIALS",
    "TASKS",
    "TOKENIZERS",
    "BPETokenizer",
    "Batch",
    "CharTokenizer",
    "DatesTask",
    "NumbersTask",
    "Pair",
    "Task",
    "Tokenizer",
    "collate",
    "encode_cached",
    "encode_pairs",
    "get_batch",
    "get_task",
    "iter_batches",
    "load_text",
    "load_tokenizer",
    "read_pairs",
    "save_tokenizer",
    "shakespeare_text",
    "split_pairs",
    "stream_generator",
    "strip_play_markdown",
    "tokenizer_from_json",
    "train_tokenizer",
    "train_val_split",
    "write_pairs",
]
