"""Whole models: a BERT-style encoder, a GPT-style decoder and a Llama-style one, configured by dataclasses, and
loading a model that ``attnlab train`` wrote."""

from attnlab.models.config import EncoderConfig, GPTConfig, ModernDecoderConfig
from attnlab.models.encoder import EncoderEmbeddings, TransformerEncoder
from attnlab.models.gpt import GPT
from attnlab.models.kv_cache import KVCache, LayerKVCache
from attnlab.models.modern import ModernDecoder
from attnlab.models.outputs import CausalLMOutput, EncoderOutput, mean_pooling, sentence_embedding
from attnlab.models.trained import ARCHITECTURES, load_trained

__all__ = [
    "ARCHITECTURES",
    "GPT",
    "CausalLMOutput",
    "EncoderConfig",
    "EncoderEmbeddings",
    "EncoderOutput",
    "GPTConfig",
    "KVCache",
    "LayerKVCache",
    "ModernDecoder",
    "ModernDecoderConfig",
    "TransformerEncoder",
    "load_trained",
    "mean_pooling",
    "sentence_embedding",
]
