"""Whole models: a BERT-style encoder, a GPT-style decoder, a Llama-style one and the original encoder-decoder,
configured by dataclasses, and loading a model that ``attnlab train`` wrote."""

from attnlab.models.caches import (
    KVCache,
    LayerKVCache,
    StaticKVCache,
    StaticLayerKVCache,
    compute_dtype,
)
from attnlab.models.checkpoint import load_trained
from attnlab.models.config import DTYPES
from attnlab.models.encoder import EncoderConfig, EncoderEmbeddings, TransformerEncoder
from attnlab.models.gpt import GPT, GPTConfig
from attnlab.models.modern import ModernDecoder, ModernDecoderConfig
from attnlab.models.outputs import CausalLMOutput, EncoderOutput, Seq2SeqOutput, mean_pooling, sentence_embedding
from attnlab.models.registry import ARCHITECTURES, Architecture
from attnlab.models.transformer import Transformer, TransformerConfig

__all__ = [
    "ARCHITECTURES",
    "DTYPES",
    "GPT",
    "Architecture",
    "CausalLMOutput",
    "EncoderConfig",
    "EncoderEmbeddings",
    "EncoderOutput",
    "GPTConfig",
    "KVCache",
    "LayerKVCache",
    "ModernDecoder",
    "ModernDecoderConfig",
    "Seq2SeqOutput",
    "StaticKVCache",
    "StaticLayerKVCache",
    "Transformer",
    "TransformerConfig",
    "TransformerEncoder",
    "compute_dtype",
    "load_trained",
    "mean_pooling",
    "sentence_embedding",
]
