"""Small models of every kind the explorer serves, built here (random weights: the numbers shown must be the model's
whatever they are), and an API over them."""

import pytest
import torch

from attnlab.data.tokenizer import CharTokenizer
from attnlab.explore.api import Api
from attnlab.explore.entry import entry_for
from attnlab.models import GPT, GPTConfig, ModernDecoder, ModernDecoderConfig, Transformer, TransformerConfig
from explore_reference import CHARS, PAIRS


@pytest.fixture(scope="session")
def tokenizer():
    return CharTokenizer.train(CHARS)


@pytest.fixture(scope="session")
def models(tokenizer):
    """name -> (model, tokenizer): a GPT (learned positions, 64), a modern decoder (RoPE, 4 query heads reading 2
    key/value heads), one with sliding-window layers (a rolling cache), and a translation model."""
    torch.manual_seed(0)
    vocab = CharTokenizer.from_pairs(PAIRS)
    built = {
        "gpt": (GPT(GPTConfig.from_preset("tiny", vocab_size=tokenizer.vocab_size, context_length=64)), tokenizer),
        "modern": (ModernDecoder(ModernDecoderConfig.from_preset("tiny", vocab_size=tokenizer.vocab_size,
                                                                 context_length=64)), tokenizer),
        "windowed": (ModernDecoder(ModernDecoderConfig.from_preset("tiny", vocab_size=tokenizer.vocab_size,
                                                                   context_length=64, sliding_window=8)), tokenizer),
        "s2s": (Transformer(TransformerConfig.from_preset("transformer-tiny", vocab_size=vocab.vocab_size,
                                                          context_length=40, dropout=0.0)), vocab),
    }
    return {name: (model.eval(), tok) for name, (model, tok) in built.items()}


@pytest.fixture(scope="session")
def api(models):
    return Api([entry_for(model, tok, name) for name, (model, tok) in models.items()])


@pytest.fixture(scope="session")
def bert():
    from attnlab.pretrained import load_bert

    try:
        return load_bert().eval()
    except ImportError as err:
        pytest.skip(f"the shipped MiniLM needs the pretrained extra: {err}")


@pytest.fixture(scope="session")
def bert_api(bert):
    return Api([entry_for(bert, name="minilm")])


@pytest.fixture(autouse=True)
def _one_torch_thread(one_thread):
    """Every explorer test on one torch thread (the server's worker thread too): tiny models, a shared machine."""
