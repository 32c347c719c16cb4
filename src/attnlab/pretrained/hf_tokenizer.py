"""The model's own tokenizer, through the ``tokenizers`` library (Rust, fast): ``tokenizer.json`` if
present, else a WordPiece tokenizer built from ``vocab.txt``."""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Tokenizer
from tokenizers.implementations import BertWordPieceTokenizer

from attnlab.files import read_text
from attnlab.i18n import tr


def load_tokenizer(model_dir: Path) -> Tokenizer | BertWordPieceTokenizer:
    """The tokenizer of a Hugging Face style directory, with its own truncation and padding turned off
    (attnlab pads per batch and truncates only when asked)."""
    tok_json, vocab = model_dir / "tokenizer.json", model_dir / "vocab.txt"
    tokenizer: Tokenizer | BertWordPieceTokenizer
    if tok_json.is_file():
        tokenizer = Tokenizer.from_file(str(tok_json))
    elif vocab.is_file():
        lower = True
        cfg = model_dir / "tokenizer_config.json"
        if cfg.is_file():
            lower = bool(json.loads(read_text(cfg, "model")).get("do_lower_case", True))
        tokenizer = BertWordPieceTokenizer(str(vocab), lowercase=lower)
    else:
        raise FileNotFoundError(tr("{model_dir}: missing tokenizer.json (or vocab.txt): the model's tokenizer",
                                   model_dir=model_dir))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer
