"""A language model's own tokenizer (``tokenizer.json``) with the interface of attnlab's tokenizers.

``tokenizers.Tokenizer.encode`` returns an ``Encoding``; attnlab's generation, sampling and capture code wants
``encode(text) -> ids`` and ``decode(ids) -> text`` (as :mod:`attnlab.data.tokenizer` has them). This wrapper
gives a checkpoint's tokenizer that interface and nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tokenizers import Tokenizer

from attnlab.i18n import tr


class TextTokenizer:
    """``tokenizer.json`` of a Hugging Face model directory, as attnlab's code calls a tokenizer.

    Args:
        tokenizer: the ``tokenizers.Tokenizer`` read from ``tokenizer.json``.
        add_special_tokens: let ``encode`` add what the tokenizer's post-processor adds (Llama 3's
            ``<|begin_of_text|>``, Mistral's ``<s>``; nothing for GPT-2 and Qwen2), as ``transformers`` does.
    """

    kind = "hf"

    def __init__(self, tokenizer: Tokenizer, add_special_tokens: bool = True) -> None:
        self.tokenizer, self.add_special_tokens = tokenizer, add_special_tokens
        tokenizer.no_truncation()
        tokenizer.no_padding()

    @classmethod
    def from_dir(cls, model_dir: str | Path) -> TextTokenizer:
        """The tokenizer of a model directory; a FileNotFoundError if it has no ``tokenizer.json``."""
        path = Path(model_dir) / "tokenizer.json"
        if not path.is_file():
            raise FileNotFoundError(tr("{model_dir}: missing tokenizer.json (the model's own tokenizer, which "
                                       "transformers' save_pretrained of a fast tokenizer writes)",
                                       model_dir=model_dir))
        try:
            return cls(Tokenizer.from_file(str(path)))
        except Exception as err:  # the Rust library raises its own exception type
            raise ValueError(tr("{path}: not a tokenizer the tokenizers library can read: {err}", path=path,
                                err=err)) from None

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        """``text`` -> token ids."""
        return self.tokenizer.encode(text, add_special_tokens=self.add_special_tokens).ids

    def decode(self, ids: Sequence[int]) -> str:
        """Token ids -> text, special tokens left out."""
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=True)

    def id_to_token(self, i: int) -> str:
        """The token's own spelling (``Ġcat`` for a byte-level BPE's " cat"), for labels."""
        token = self.tokenizer.id_to_token(int(i))
        return f"<{i}>" if token is None else token

    def to_json(self) -> str:
        return self.tokenizer.to_str()
