"""The architectures attnlab builds, in one table: what every list of architectures and presets reads.

A checkpoint's ``state.json`` names its architecture; ``attnlab train --arch`` and ``attnlab train-seq2seq`` offer
the ones of their kind; :class:`~attnlab.training.TrainConfig` accepts them; :func:`~attnlab.models.load_trained`
builds them; the docs list them. Adding an architecture is a module with its config and model, and one line here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from torch import nn

from attnlab.i18n import N_, tr
from attnlab.models.config import Presets
from attnlab.models.encoder import EncoderConfig, TransformerEncoder
from attnlab.models.gpt import GPT, GPTConfig
from attnlab.models.modern import ModernDecoder, ModernDecoderConfig
from attnlab.models.modern.deepseek import DeepseekConfig, DeepseekModel
from attnlab.models.modern.diffllama import DiffLlamaConfig
from attnlab.models.modern.gemma4 import Gemma4Config, Gemma4Decoder
from attnlab.models.modern.hybrid import HybridDecoder
from attnlab.models.modern.kimi_linear import KimiLinearConfig, KimiLinearModel
from attnlab.models.modern.qwen3_next import Qwen3NextConfig
from attnlab.models.modern.smollm3 import SmolLM3Config
from attnlab.models.transformer import Transformer, TransformerConfig

#: what a model of a kind does: "decoder" continues text (``attnlab train``, ``sample``), "seq2seq" turns a source
#: into a target (``attnlab train-seq2seq``, ``translate``), "encoder" turns text into vectors (loaded, not trained)
Kind = Literal["decoder", "seq2seq", "encoder"]


@dataclass(frozen=True)
class Architecture:
    """One family: its name (as checkpoints and ``--arch`` spell it), its config and model classes, its kind."""

    name: str
    config: type[Presets]
    model: type[nn.Module]
    kind: Kind
    summary: str  # one line for ``--arch`` and the docs (English; ``attnlab.i18n._`` translates it)

    @property
    def presets(self) -> tuple[str, ...]:
        """The names ``config.from_preset`` accepts."""
        return tuple(self.config.PRESETS)


ARCHITECTURES: dict[str, Architecture] = {a.name: a for a in (
    Architecture("gpt", GPTConfig, GPT, "decoder", N_("GPT-2's layout")),
    Architecture("modern", ModernDecoderConfig, ModernDecoder, "decoder",
                 N_("Llama's: RoPE, grouped-query attention, RMSNorm, SwiGLU")),
    Architecture("diffllama", DiffLlamaConfig, ModernDecoder, "decoder",
                 N_("DiffLlama's: differential attention, two softmax maps per pair of heads, subtracted")),
    Architecture("smollm3", SmolLM3Config, ModernDecoder, "decoder", N_("SmolLM3's: every fourth layer without RoPE")),
    Architecture("qwen3_next", Qwen3NextConfig, HybridDecoder, "decoder",
                 N_("Qwen3-Next's and Qwen3.5's: three Gated DeltaNet layers to one gated attention layer")),
    Architecture("deepseek", DeepseekConfig, DeepseekModel, "decoder",
                 N_("DeepSeek-V2/V3's: multi-head latent attention, a mixture of experts")),
    Architecture("gemma4", Gemma4Config, Gemma4Decoder, "decoder",
                 N_("Gemma 4's: shared keys, proportional RoPE, per-layer inputs")),
    Architecture("kimi_linear", KimiLinearConfig, KimiLinearModel, "decoder",
                 N_("Kimi Linear's: three Kimi Delta Attention layers to one MLA layer without RoPE, a mixture of "
                    "experts")),
    Architecture("transformer", TransformerConfig, Transformer, "seq2seq", N_("the original encoder-decoder")),
    Architecture("encoder", EncoderConfig, TransformerEncoder, "encoder", N_("BERT's encoder")),
)}


def names_of(kind: Kind) -> tuple[str, ...]:
    """The architectures of ``kind``, in the table's order (the first is the default)."""
    return tuple(name for name, a in ARCHITECTURES.items() if a.kind == kind)


def architecture(name: str, kind: Kind | None = None) -> Architecture:
    """The table's row for ``name`` (of ``kind``, if given); anything else is a ValueError naming the choices."""
    choices = names_of(kind) if kind is not None else tuple(ARCHITECTURES)
    if name not in choices:
        raise ValueError(tr("architecture: expected one of {architectures}, got {architecture!r}",
                            architectures=sorted(choices), architecture=name))
    return ARCHITECTURES[name]


def build_model(name: str, model_config: dict[str, Any]) -> nn.Module:
    """A fresh model of architecture ``name`` from its config's fields."""
    row = architecture(name)
    return row.model(row.config(**model_config))
