"""Whole models: a BERT-style encoder, a GPT-style decoder, a Llama-style one and the original encoder-decoder,
configured by dataclasses, and loading a model that ``attnlab train`` wrote."""

from attnlab.models.config import EncoderConfig, GPTConfig, ModernDecoderConfig
from attnlab.models.dtypes import DTYPES, compute_dtype
from attnlab.models.encoder import EncoderEmbeddings, TransformerEncoder
from attnlab.models.gpt import GPT
from attnlab.models.kv_cache import KVCache, LayerKVCache
from attnlab.models.modern import ModernDecoder
from attnlab.models.outputs import CausalLMOutput, EncoderOutput, Seq2SeqOutput, mean_pooling, sentence_embedding
from attnlab.models.seq2seq_cache import DecoderLayerCache, Seq2SeqCache
from attnlab.models.seq2seq_config import PRESETS as TRANSFORMER_PRESETS
from attnlab.models.seq2seq_config import TransformerConfig
from attnlab.models.static_kv_cache import StaticKVCache, StaticLayerKVCache
from attnlab.models.trained import ARCHITECTURES, load_trained
from attnlab.models.transformer import Transformer

__all__ = [
    "ARCHITECTURES",
    "DTYPES",
    "GPT",
    "TRANSFORMER_PRESETS",
    "CausalLMOutput",
    "DecoderLayerCache",
    "EncoderConfig",
    "EncoderEmbeddings",
    "EncoderOutput",
    "GPTConfig",
    "KVCache",
    "LayerKVCache",
    "ModernDecoder",
    "ModernDecoderConfig",
    "Seq2SeqCache",
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
