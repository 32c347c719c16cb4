"""Today's decoders: a decoder as Llama, Qwen2 and Mistral build one (:mod:`~attnlab.models.modern.decoder`), the
options the newest open models added to it (:mod:`~attnlab.models.modern.options`), and the families whose
attention or feed-forward goes further, one module each, each a config whose ``layer_spec(i)`` writes a layer down."""

from attnlab.models.modern.decoder import ModernDecoder, ModernDecoderConfig
from attnlab.models.modern.diffllama import DiffLlamaConfig
from attnlab.models.modern.smollm3 import SmolLM3Config

__all__ = ["DiffLlamaConfig", "ModernDecoder", "ModernDecoderConfig", "SmolLM3Config"]
