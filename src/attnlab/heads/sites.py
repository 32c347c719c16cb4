"""Where patching reaches into a model: its heads' outputs, queries, keys and values, and its residual stream.

Everything is read and written through forward hooks on the modules every attnlab attention has (``W_query``,
``W_key``, ``W_value``, ``out_proj``) and on the blocks, never through an attention module's own arithmetic:

* a head's **output** is its slice of ``out_proj``'s input, ``(B, T, H · head_dim)`` split into ``H`` heads (what
  ``head_mask`` scales);
* its **query**, **key** and **value** are its slices of ``W_query``'s, ``W_key``'s and ``W_value``'s outputs. A
  rotary model turns q and k after the projection (and a QK-norm model normalises each head's vector there first):
  both depend on the position alone and on the head's own slice, and clean and corrupted runs have the same
  positions, so patching before them is patching after them. A grouped-query model has fewer key/value heads than
  query heads, and a key/value head serves a whole group of query heads: the ``key`` and ``value`` sites have its
  ``num_kv_heads`` heads (TransformerLens counts them so too); patching one changes the keys of its group's every
  query head;
* the **residual** stream before layer ``l`` is the input of block ``l``.

:func:`patchable` says which attention is patched: every block's self-attention in a decoder (GPT, ModernDecoder,
the attention-only model, a loaded checkpoint); a translation model's (:class:`attnlab.models.Transformer`)
cross-attention, where the decoder reads the source. Its inputs are then ``(source, target)`` pairs, and a
cross-attention's key and value read the source's positions, its output and query the target's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, get_args

import torch
from torch import Tensor, nn

from attnlab.attention import MultiHeadAttention
from attnlab.heads.attention_only import AttentionOnlyTransformer
from attnlab.i18n import tr
from attnlab.models import LanguageModel, Transformer

Site = Literal["output", "query", "key", "value"]
#: the sites of a head, in the order of the docs
SITES: tuple[str, ...] = get_args(Site)
#: the site of the residual stream (before a block), beside a head's
RESIDUAL = "residual"
#: the module whose tensor a site is: a head's output is ``out_proj``'s input, the others their map's output
SITE_MODULES = {"output": "out_proj", "query": "W_query", "key": "W_key", "value": "W_value"}
Positions = Literal["all", "each"]
POSITIONS: tuple[str, ...] = get_args(Positions)
Inputs = Tensor | tuple[Tensor, Tensor]


@dataclass(frozen=True)
class HeadLayer:
    """One layer's attention whose heads are patched: the module, its query heads, key/value heads and head width."""

    attention: MultiHeadAttention
    num_heads: int
    num_kv_heads: int
    head_dim: int

    def module(self, site: str) -> nn.Module:
        return getattr(self.attention, SITE_MODULES[site])

    def heads(self, site: str) -> int:
        """How many heads ``site`` has: the key/value heads for ``key`` and ``value``."""
        return self.num_kv_heads if site in ("key", "value") else self.num_heads


def attention_modules(module: nn.Module) -> list[MultiHeadAttention]:
    """The attention modules inside ``module`` (those with ``W_query``, ``W_key``, ``W_value`` and ``out_proj``)."""
    return [m for m in module.modules()
            if isinstance(m, MultiHeadAttention) and all(hasattr(m, n) for n in SITE_MODULES.values())]


def head_layer(attention: object) -> HeadLayer:
    if not isinstance(attention, MultiHeadAttention):
        raise TypeError(f"head_layer: expected a MultiHeadAttention, got {type(attention).__name__}")
    return HeadLayer(attention, attention.num_heads, attention.num_kv_heads, attention.head_dim)


class Patchable:
    """A model as patching sees it.

    Attributes:
        model: the model itself.
        kind: ``"decoder"`` (inputs ``(B, T)`` ids) or ``"seq2seq"`` (``(source, target)`` pairs).
        layers: the attention whose heads are patched, one :class:`HeadLayer` per layer.
        blocks: the blocks whose input is the residual stream (a translation model's decoder blocks).
        mixers: per block, every attention module that adds to its residual stream (path patching holds their
            outputs at the corrupted run's); a decoder's is its head layer, a translation model's block has its
            masked self-attention and its cross-attention.
        final_norm, unembed: the norm before the output layer (None: none) and the output layer.
        vocab_size: ids must lie in ``[0, vocab_size)``.
    """

    blocks: list[nn.Module]
    final_norm: nn.Module | None

    def __init__(self, model: nn.Module) -> None:
        if isinstance(model, Transformer):
            self.kind = "seq2seq"
            self.blocks = list(model.decoder_blocks)
            self.layers = [head_layer(block.cross_attn) for block in self.blocks]
            self.mixers = [attention_modules(block) for block in self.blocks]
            self.final_norm = model.decoder_norm
        elif isinstance(model, LanguageModel | AttentionOnlyTransformer):
            self.kind = "decoder"
            self.blocks = list(model.blocks)
            self.mixers = [attention_modules(block) for block in self.blocks]
            if any(len(found) != 1 for found in self.mixers):
                raise ValueError(tr("{model}: every block must hold one attention module to patch, found {counts}",
                                    model=type(model).__name__, counts=[len(found) for found in self.mixers]))
            self.layers = [head_layer(found[0]) for found in self.mixers]
            self.final_norm = getattr(model, getattr(model, "FINAL_NORM", "ln_f"))
        else:
            raise ValueError(tr("{model} has no heads to patch for a metric of logits: patching needs a decoder (GPT, "
                                "ModernDecoder, AttentionOnlyTransformer, a causal language model that "
                                "load_causal_lm loaded) or a translation model (Transformer); an encoder such as "
                                "BERT or MiniLM returns no logits to take a metric of", model=type(model).__name__))
        self.model = model
        self.unembed = model.head
        self.vocab_size = int(model.config.vocab_size)
        shapes = {(layer.num_heads, layer.num_kv_heads) for layer in self.layers}
        if len(shapes) != 1:
            raise ValueError(tr("{model}: patching needs the same number of heads in every layer, got {shapes}",
                                model=type(model).__name__, shapes=sorted(shapes)))

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def heads(self, site: str) -> int:
        """Heads per layer at ``site`` (one for the residual stream)."""
        return 1 if site == RESIDUAL else self.layers[0].heads(site)

    def run(self, inputs: Inputs) -> Tensor:
        """The logits ``(B, T, V)`` of one forward pass."""
        if self.kind == "seq2seq":
            return self.model(*inputs).logits
        return self.model(inputs).logits

    def batch(self, inputs: Inputs) -> int:
        return self.target(inputs).shape[0]

    def target(self, inputs: Inputs) -> Tensor:
        """The ids the logits are of: a decoder's, or a translation model's target."""
        return inputs[1] if isinstance(inputs, tuple) else inputs  # a pair: seq2seq's (source, target)

    def length(self, inputs: Inputs, site: str) -> int:
        """The positions ``site`` has: the source's for a cross-attention's key and value, else the target's."""
        if isinstance(inputs, tuple) and site in ("key", "value"):  # a pair: seq2seq's (source, target)
            return inputs[0].shape[1]
        return self.target(inputs).shape[1]

    def tiled(self, inputs: Inputs, copies: int) -> Inputs:
        """``copies`` copies of the batch, one after the other: row ``g · B + b`` is row ``b`` of copy ``g``."""
        if isinstance(inputs, tuple):  # a pair: seq2seq's (source, target)
            return inputs[0].repeat(copies, 1), inputs[1].repeat(copies, 1)
        return inputs.repeat(copies, 1)

    def check_pair(self, clean: object, corrupt: object) -> tuple[Inputs, Inputs]:
        """``clean`` and ``corrupt`` checked: ids of one shape, in the vocabulary (pairs of them for seq2seq)."""
        if self.kind == "seq2seq":
            parts = [self._pair(clean, "clean"), self._pair(corrupt, "corrupt")]
            for i, name in enumerate(("source", "target")):
                self._same_shape(parts[0][i], parts[1][i], f"clean {name}", f"corrupt {name}")
            return parts[0], parts[1]
        clean, corrupt = self._ids(clean, "clean"), self._ids(corrupt, "corrupt")
        self._same_shape(clean, corrupt, "clean", "corrupt")
        return clean, corrupt

    def check_inputs(self, inputs: object, name: str = "inputs") -> Inputs:
        return self._pair(inputs, name) if self.kind == "seq2seq" else self._ids(inputs, name)

    def _pair(self, value: object, name: str) -> tuple[Tensor, Tensor]:
        if not isinstance(value, tuple | list) or len(value) != 2:
            raise ValueError(tr("{name}: a translation model's input is a (source, target) pair of id tensors, got "
                                "{got}", name=name, got=type(value).__name__))
        return self._ids(value[0], f"{name} source"), self._ids(value[1], f"{name} target")

    def _ids(self, ids: object, name: str) -> Tensor:
        if not isinstance(ids, Tensor) or ids.dim() != 2 or ids.dtype not in (torch.int64, torch.int32):
            got = f"{ids.dtype} {tuple(ids.shape)}" if isinstance(ids, Tensor) else type(ids).__name__
            raise ValueError(tr("{name}: expected token ids (B, T) of an integer dtype, got {got}", name=name,
                                got=got))
        if ids.numel() == 0:
            raise ValueError(tr("{name}: expected at least one token, got shape {shape}", name=name,
                                shape=tuple(ids.shape)))
        bad = (ids < 0) | (ids >= self.vocab_size)
        if bad.any():
            where = tuple(int(i) for i in bad.nonzero()[0])
            raise ValueError(tr("{name}: token ids must be in [0, {vocab_size}), the model's vocabulary; got "
                                "{value} at {where}", name=name, vocab_size=self.vocab_size,
                                value=int(ids[where]), where=where))
        return ids.long()

    @staticmethod
    def _same_shape(a: Tensor, b: Tensor, name_a: str, name_b: str) -> None:
        if a.shape != b.shape:
            raise ValueError(tr("{a} and {b} must have one shape (patching swaps activations position by position), "
                                "got {shape_a} and {shape_b}", a=name_a, b=name_b, shape_a=tuple(a.shape),
                                shape_b=tuple(b.shape)))

    def check_site(self, site: object, residual: bool = False) -> str:
        allowed = (*SITES, RESIDUAL) if residual else SITES
        if site not in allowed:
            raise ValueError(tr("site must be one of {allowed}, got {site!r}", allowed=", ".join(allowed), site=site))
        if site in ("query", "key") and any(getattr(lay.attention, "qk_norm", None) == "projection"
                                            for lay in self.layers):
            raise ValueError(tr("site={site!r}: this model normalises the whole query and key projections together "
                                "(qk_norm='projection'), so one head's {site} before the norm is not the head's "
                                "alone; patch the output or the value", site=site))
        return str(site)

    def check_layers(self, layers: object) -> list[int]:
        """``layers`` (None: all) as a list of valid layer indices."""
        if layers is None:
            return list(range(self.num_layers))
        chosen = list(layers) if isinstance(layers, Iterable) and not isinstance(layers, Tensor) else None
        if chosen is None or not all(isinstance(x, int) and not isinstance(x, bool) for x in chosen):
            raise ValueError(tr("layers must be None or a sequence of layer indices, got {layers!r}", layers=layers))
        for layer in chosen:
            self.check_layer(layer)
        return sorted(set(chosen))

    def check_layer(self, layer: int, name: str = "layer") -> int:
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < self.num_layers:
            raise ValueError(tr("{name} must be in 0..{last} (the model's {count} layers), got {layer!r}", name=name,
                                last=self.num_layers - 1, count=self.num_layers, layer=layer))
        return layer

    def check_head(self, head: int, site: str = "output", name: str = "head") -> int:
        count = self.heads(site)
        if isinstance(head, bool) or not isinstance(head, int) or not 0 <= head < count:
            raise ValueError(tr("{name} must be in 0..{last} ({count} heads at the {site} site), got {head!r}",
                                name=name, last=count - 1, count=count, site=site, head=head))
        return head


def patchable(model: nn.Module) -> Patchable:
    """``model`` as patching sees it (a ValueError, naming the model, if it has no heads to patch)."""
    if not isinstance(model, nn.Module):
        raise ValueError(tr("model must be a torch.nn.Module, got {model_type}", model_type=type(model).__name__))
    return Patchable(model)
