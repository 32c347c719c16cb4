"""Text in, text out: encode a prompt, generate from it, and stream the new text as it arrives."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from attnlab.generation.config import GenerationConfig
from attnlab.generation.decode import generate, generate_stream
from attnlab.generation.ragged import encode_prompts
from attnlab.i18n import tr


def encode_prompt(tokenizer: Any, prompt: str) -> torch.Tensor:
    """``prompt`` -> ids ``(1, T)``; an empty prompt or one the tokenizer cannot encode is a ValueError."""
    if not prompt:
        raise ValueError(tr("prompt: expected at least one character, got an empty prompt"))
    try:
        ids = tokenizer.encode(prompt)
    except ValueError as err:
        raise ValueError(tr("prompt: {err}", err=err)) from None
    return torch.as_tensor(ids, dtype=torch.long)[None]


def stream_text(model: Any, tokenizer: Any, prompt: str, max_new_tokens: int, config: GenerationConfig | None = None,
                cache: Any = None) -> Iterator[str]:
    """The generated text, piece by piece as the tokens arrive (``config`` and ``cache``: see ``generate``).

    Everything is checked and the prompt encoded when this is called, before the first piece is asked for,
    so a caller can fail before printing anything. Byte-level BPE tokens may end inside a multi-byte
    character; such a piece is held back until the character is complete, so every piece is valid text.
    """
    idx = encode_prompt(tokenizer, prompt).to(next(model.parameters()).device)
    return _pieces(generate_stream(model, idx, max_new_tokens, config, cache), tokenizer)


def generate_texts(model: Any, tokenizer: Any, prompts: list[str], max_new_tokens: int,
                   config: GenerationConfig | None = None) -> list[str]:
    """Each prompt followed by its generated text, the prompts decoded together as one ragged batch (KV cache
    on; :mod:`attnlab.generation.ragged`): with ``temperature=0`` each the text it gets alone."""
    rows = generate(model, encode_prompts(prompts, tokenizer), max_new_tokens, config)
    return [tokenizer.decode(row) for row in rows]


def _pieces(tokens: Iterator[torch.Tensor], tokenizer: Any) -> Iterator[str]:
    new: list[int] = []
    shown = 0
    for token in tokens:
        new.append(int(token[0]))
        text = tokenizer.decode(new)
        if not text.endswith("\ufffd") and len(text) > shown:
            yield text[shown:]
            shown = len(text)
    text = tokenizer.decode(new)
    if len(text) > shown:
        yield text[shown:]
