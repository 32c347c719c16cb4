"""Whole models: a BERT-style encoder, a GPT-style decoder, a Llama-style one and the original encoder-decoder,
configured by dataclasses, and loading a model that ``attnlab train`` wrote."""

from attnlab.models.caches import (
    STORAGES,
    CacheLayout,
    CacheShape,
    KVCache,
    LayerKVCache,
    RollingLayerKVCache,
    SinkKVCache,
    StaticKVCache,
    StaticLayerKVCache,
    compute_dtype,
)
from attnlab.models.checkpoint import load_trained
from attnlab.models.config import DTYPES
from attnlab.models.encoder import (
    EncoderConfig,
    EncoderEmbeddings,
    EncoderOutput,
    TransformerEncoder,
    mean_pooling,
    sentence_embedding,
)
from attnlab.models.gpt import GPT, GPTConfig
from attnlab.models.language_model import CausalLMOutput, LanguageModel
from attnlab.models.modern import (
    DiffLlamaConfig,
    ModernDecoder,
    ModernDecoderConfig,
    SmolLM3Config,
)
from attnlab.models.modern.deepseek import DeepseekConfig, DeepseekModel
from attnlab.models.quantize import SCHEMES, is_quantized, quantize
from attnlab.models.registry import ARCHITECTURES, Architecture
from attnlab.models.transformer import Seq2SeqHeadMask, Seq2SeqOutput, Transformer, TransformerConfig

__all__ = [
    "ARCHITECTURES",
    "DTYPES",
    "GPT",
    "SCHEMES",
    "STORAGES",
    "Architecture",
    "CacheLayout",
    "CacheShape",
    "CausalLMOutput",
    "DeepseekConfig",
    "DeepseekModel",
    "DiffLlamaConfig",
    "EncoderConfig",
    "EncoderEmbeddings",
    "EncoderOutput",
    "GPTConfig",
    "KVCache",
    "LanguageModel",
    "LayerKVCache",
    "ModernDecoder",
    "ModernDecoderConfig",
    "RollingLayerKVCache",
    "Seq2SeqHeadMask",
    "Seq2SeqOutput",
    "SinkKVCache",
    "SmolLM3Config",
    "StaticKVCache",
    "StaticLayerKVCache",
    "Transformer",
    "TransformerConfig",
    "TransformerEncoder",
    "compute_dtype",
    "is_quantized",
    "load_trained",
    "mean_pooling",
    "quantize",
    "sentence_embedding",
]
