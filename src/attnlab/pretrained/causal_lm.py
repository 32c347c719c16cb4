"""``load_causal_lm``: a GPT-2, Llama, Qwen2, Mistral, Qwen3, Gemma 2, Gemma 3 (text), Phi-3, DiffLlama, SmolLM3,
Qwen3-Next, Qwen3.5 (text, dense or MoE), DeepSeek-V2, V3, V3.2, Gemma 4 (text) or Kimi Linear checkpoint from a
Hugging Face model directory, offline.

    config.json          -> the architecture (``architectures``) and an attnlab config (decoder_configs)
    model.safetensors    -> the weights, every tensor's name and shape checked (checkpoint_files, decoder_weights)
      or model.safetensors.index.json and its shards
    tokenizer.json       -> the model's own tokenizer (text_tokenizer)

GPT-2 becomes attnlab's :class:`~attnlab.models.GPT`, DeepSeek a :class:`~attnlab.models.modern.deepseek.DeepseekModel`
(MLA and a mixture of experts: pretrained/deepseek.py); the others a :class:`~attnlab.models.ModernDecoder`, with
the options each family needs (QK-norm, soft-capping, local and global layers, ...: docs/newest-attention.md).
Both return ``.logits (B, T, V)`` and take a KV cache, so :func:`attnlab.generation.generate`,
:func:`attnlab.inspect.capture` and the views work on them as on a model ``attnlab train`` wrote.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open

import attnlab.pretrained.diffllama as diffllama_loader
import attnlab.pretrained.gemma4 as gemma4_loader
import attnlab.pretrained.kimi_linear as kimi_linear_loader
import attnlab.pretrained.smollm3 as smollm3_loader
from attnlab.i18n import tr
from attnlab.models import GPT, GPTConfig, ModernDecoder
from attnlab.models.modern.deepseek import DeepseekModel
from attnlab.models.modern.gemma4 import Gemma4Decoder
from attnlab.models.modern.hybrid import HybridDecoder
from attnlab.models.modern.kimi_linear import KimiLinearModel
from attnlab.pretrained.checkpoint_files import Expected, read_tensors, shard_files
from attnlab.pretrained.config_fields import refuse_unknown_fields
from attnlab.pretrained.decoder_configs import SUPPORTED, read_decoder_config
from attnlab.pretrained.decoder_weights import IGNORED, gpt2_layout, llama_layout, phi3_layout
from attnlab.pretrained.deepseek import deepseek_config, read_deepseek_state
from attnlab.pretrained.qwen3_next import read_config as qwen3_next_config
from attnlab.pretrained.qwen3_next import read_state as qwen3_next_state
from attnlab.pretrained.text_tokenizer import TextTokenizer


@dataclass(frozen=True)
class FamilyLoader:
    """A family with a loader of its own (``pretrained/<family>.py``): its ``config.json`` reader ``(raw, path) ->
    config``, its tensor layout ``(our shapes, config) -> {checkpoint name: Expected}``, its model class, the
    stored tensors that are not part of the model, and, for a family whose tensors are not stored one to one
    (DeepSeek's and Qwen3-Next's experts, one tensor each, stacked here), its own reader ``(directory, model,
    dtype) -> state`` in place of the layout."""

    config: Callable[[dict[str, Any], Path], Any]
    layout: Callable[[dict[str, torch.Size], Any], dict[str, Expected]] | None
    model: type[ModernDecoder]
    skipped: re.Pattern[str] = IGNORED
    read_state: Callable[[Path, Any, torch.dtype], dict[str, torch.Tensor]] | None = None


def _deepseek_reader(family: str, raw: dict[str, Any], path: Path) -> Any:
    """DeepSeek's config.json: every field known to config_fields' table, then read by pretrained/deepseek.py."""
    refuse_unknown_fields(family, raw, path)
    return deepseek_config(family, raw, path)


#: family (:data:`SUPPORTED`'s values) -> its loader; each loader module of one family names it
FAMILIES: dict[str, FamilyLoader] = {
    **{m.FAMILY: FamilyLoader(m.read_config, m.layout, ModernDecoder) for m in (diffllama_loader, smollm3_loader)},
    **{family: FamilyLoader(partial(qwen3_next_config, family), None, HybridDecoder,
                            read_state=partial(qwen3_next_state, family))
       for family in ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text")},
    **{family: FamilyLoader(partial(_deepseek_reader, family), None, DeepseekModel, read_state=read_deepseek_state)
       for family in ("deepseek_v2", "deepseek_v3", "deepseek_v32")},
    gemma4_loader.FAMILY: FamilyLoader(gemma4_loader.read_config, gemma4_loader.layout, Gemma4Decoder),
    kimi_linear_loader.FAMILY: FamilyLoader(kimi_linear_loader.read_config, None, KimiLinearModel,
                                            read_state=kimi_linear_loader.read_state)}

__all__ = ["SUPPORTED", "is_hf_model_dir", "load_causal_lm"]

def is_hf_model_dir(path: str | Path) -> bool:
    """Does ``path`` look like a Hugging Face model directory (a ``config.json`` naming ``architectures``)?"""
    config = Path(path) / "config.json"
    try:
        return config.is_file() and b'"architectures"' in config.read_bytes()  # any bytes: read_config_json names them
    except OSError:
        return False


def _gpt2_prefix(model_dir: Path) -> str:
    """"transformer." if the tensors are GPT2LMHeadModel's, "" if a bare GPT2Model's."""
    for path in shard_files(model_dir):
        try:
            with safe_open(str(path), framework="pt") as f:
                if any(name.startswith("transformer.") for name in f.keys()):  # noqa: SIM118
                    return "transformer."
        except SafetensorError as e:
            raise ValueError(tr("{path}: not a valid safetensors file (truncated or corrupt?): {e}", path=path,
                                e=e)) from None
    return ""


def _layout(model_dir: Path, model: GPT | ModernDecoder, family: str) -> dict[str, Expected]:
    c = model.config
    shapes = {name: t.shape for name, t in model.state_dict().items()}
    layout = FAMILIES[family].layout if family in FAMILIES else None
    if layout is not None:
        return layout(shapes, c)
    if isinstance(model, GPT):
        return gpt2_layout(shapes, c.num_layers, c.tie_weights, _gpt2_prefix(model_dir))
    if family == "phi3":
        return phi3_layout(shapes, c.num_layers, c.tie_weights)
    return llama_layout(shapes, c.num_layers, c.tie_weights, sandwich=c.sandwich_norm)


def _load_state(model: GPT | ModernDecoder, state: dict[str, torch.Tensor], model_dir: Path) -> None:
    """Put the tensors in place of the meta ones; a tied head stays tied (and must equal the embedding if stored)."""
    tied = model.config.tie_weights
    head = state.pop("head.weight", None)
    if tied and head is not None and not torch.equal(head, state["tok_emb.weight"]):
        raise ValueError(tr("{model_dir}: config.json ties the output head to the token embedding "
                            "(tie_word_embeddings), but the checkpoint's lm_head.weight differs from it",
                            model_dir=model_dir))
    if not tied and head is not None:  # a missing one the layout has refused already
        state["head.weight"] = head
    missing, unexpected = model.load_state_dict(state, strict=False, assign=True)
    if tied:
        model.head.weight = model.tok_emb.weight  # assign=True replaced the shared parameter: share it again
        missing = [m for m in missing if m != "head.weight"]
    if missing or unexpected:  # the layouts cover every parameter; this guards them
        raise ValueError(tr("{model_dir}: weights do not match the model: missing {missing}, unexpected {unexpected}",
                            model_dir=model_dir, missing=missing[:5], unexpected=unexpected[:5]))


def load_causal_lm(path: str | Path, *, dtype: torch.dtype = torch.float32,
                   device: str | torch.device = "cpu") -> tuple[GPT | ModernDecoder, TextTokenizer]:
    """A Hugging Face causal language model, as an attnlab model (eval mode) with its tokenizer.

    Args:
        path: a directory with ``config.json`` (``architectures`` one of :data:`SUPPORTED`: GPT2LMHeadModel,
            LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM, Qwen3ForCausalLM, Gemma2ForCausalLM,
            Gemma3ForCausalLM, Phi3ForCausalLM, DiffLlamaForCausalLM, SmolLM3ForCausalLM, Qwen3NextForCausalLM,
            Qwen3_5ForCausalLM, Qwen3_5MoeForCausalLM, DeepseekV2ForCausalLM, DeepseekV3ForCausalLM,
            DeepseekV32ForCausalLM, Gemma4ForCausalLM, KimiLinearForCausalLM),
            ``model.safetensors`` (or ``model.safetensors.index.json`` and its shards) and ``tokenizer.json``.
        dtype: the weights' dtype (checkpoints are often bfloat16; float32 by default, for exact comparisons).
        device: where the model goes.

    Returns:
        ``(model, tokenizer)``: a :class:`~attnlab.models.GPT` for GPT-2, a :class:`~attnlab.models.ModernDecoder`
        (DeepSeek: its subclass :class:`~attnlab.models.modern.deepseek.DeepseekModel`; Gemma 4:
        :class:`~attnlab.models.modern.gemma4.Gemma4Decoder`) otherwise, and a :class:`TextTokenizer`.

    Raises:
        FileNotFoundError: a file is missing. ValueError: an unsupported architecture (naming it and the supported
        ones), a config field the model cannot honour, a tensor missing, unexpected or of the wrong shape (naming
        the tensor and both shapes), a corrupt file.

    Example:
        >>> model, tokenizer = load_causal_lm("path/to/Llama-3.2-1B")          # doctest: +SKIP
        >>> ids = torch.tensor([tokenizer.encode("The capital of France is")])  # doctest: +SKIP
        >>> tokenizer.decode(generate(model, ids, 10, temperature=0)[0])       # doctest: +SKIP
    """
    model_dir = Path(path)
    if not model_dir.is_dir():
        raise FileNotFoundError(tr("{path!r} is not a directory (expected a Hugging Face model directory with "
                                   "config.json, model.safetensors and tokenizer.json)", path=str(path)))
    arch, config = read_decoder_config(model_dir, {name: loader.config for name, loader in FAMILIES.items()})
    tokenizer = TextTokenizer.from_dir(model_dir)
    family = FAMILIES.get(SUPPORTED[arch])
    with torch.device("meta"):  # shapes only; the real tensors come from the files
        model = family.model(config) if family else GPT(config) if isinstance(config, GPTConfig) else \
            ModernDecoder(config)
    if family is not None and family.read_state is not None:  # tensors not stored one to one (stacked experts)
        state = family.read_state(model_dir, model, dtype)
    else:
        state = read_tensors(model_dir, _layout(model_dir, model, SUPPORTED[arch]),
                             family.skipped if family else IGNORED, dtype)
    _load_state(model, state, model_dir)
    model.name = f"{arch} ({model_dir.name})"
    return model.to(device).eval(), tokenizer
