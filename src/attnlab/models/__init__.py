"""Whole models: a BERT-style encoder, a GPT-style decoder and a Llama-style one, configured by dataclasses, and
loading a model that ``attnlab train`` wrote."""

from attnlab.models.config import EncoderConfig, GPTConfig, ModernDecoderConfig
from attnlab.models.dtypes import DTYPES, compute_dtype
from attnlab.models.encoder import EncoderEmbeddings, TransformerEncoder
from attnlab.models.gpt import GPT
from attnlab.models.kv_cache import KVCache, LayerKVCache
from attnlab.models.modern import ModernDecoder
from attnlab.models.outputs import CausalLMOutput, EncoderOutput, mean_pooling, sentence_embedding
from attnlab.models.static_kv_cache import StaticKVCache, StaticLayerKVCache
from attnlab.models.trained import ARCHITECTURES, load_trained

__all__ = [
    "ARCHITECTURES",
    "DTYPES",
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
    "StaticKVCache",
    "StaticLayerKVCache",
    "TransformerEncoder",
    "compute_dtype",
    "load_trained",
    "mean_pooling",
    "sentence_embedding",
]
