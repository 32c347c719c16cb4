"""Using a trained checkpoint: load the model and its tokenizer, and stream text from a prompt."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import torch

from attnlab.data.tokenizer import Tokenizer
from attnlab.models import GPT, GPTConfig
from attnlab.training.checkpoint import load_checkpoint


def load_trained(path: str | Path, device: str | torch.device = "cpu") -> tuple[GPT, Tokenizer]:
    """The model (eval mode) and tokenizer saved in ``path`` (an output or a checkpoint directory)."""
    ckpt = load_checkpoint(path)
    model = GPT(GPTConfig(**ckpt.state["model_config"]))
    ckpt.load_weights(model)
    return model.to(device).eval(), ckpt.tokenizer


def encode_prompt(tokenizer: Tokenizer, prompt: str) -> torch.Tensor:
    """``prompt`` -> ids ``(1, T)``; an empty prompt or one the tokenizer cannot encode is a ValueError."""
    if not prompt:
        raise ValueError("prompt: expected at least one character, got an empty prompt")
    try:
        ids = tokenizer.encode(prompt)
    except ValueError as err:
        raise ValueError(f"prompt: {err}") from None
    return torch.as_tensor(ids, dtype=torch.long)[None]


def stream_text(model: GPT, tokenizer: Tokenizer, prompt: str, max_new_tokens: int, temperature: float = 1.0,
                top_k: int | None = None, top_p: float | None = None, seed: int | None = None) -> Iterator[str]:
    """Yield the generated text piece by piece, as the tokens arrive (KV cache on).

    Byte-level BPE tokens may end inside a multi-byte character; such a piece is held back until
    the character is complete, so what is yielded is always valid text.
    """
    idx = encode_prompt(tokenizer, prompt).to(next(model.parameters()).device)
    generator = None
    if seed is not None:
        generator = torch.Generator(device=idx.device).manual_seed(seed)
    new: list[int] = []
    shown = 0
    for token in model.generate_stream(idx, max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
                                       generator=generator):
        new.append(int(token[0]))
        text = tokenizer.decode(new)
        if not text.endswith("\ufffd") and len(text) > shown:
            yield text[shown:]
            shown = len(text)
    text = tokenizer.decode(new)
    if len(text) > shown:
        yield text[shown:]
