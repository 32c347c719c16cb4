"""Whole models: a BERT-style encoder and a GPT-style decoder, configured by dataclasses."""

from attnlab.models.config import EncoderConfig, GPTConfig
from attnlab.models.encoder import EncoderEmbeddings, TransformerEncoder
from attnlab.models.gpt import GPT
from attnlab.models.kv_cache import KVCache, LayerKVCache
from attnlab.models.outputs import EncoderOutput, GPTOutput, mean_pooling, sentence_embedding

__all__ = [
    "GPT",
    "EncoderConfig",
    "EncoderEmbeddings",
    "EncoderOutput",
    "GPTConfig",
    "GPTOutput",
    "KVCache",
    "LayerKVCache",
    "TransformerEncoder",
    "mean_pooling",
    "sentence_embedding",
]
