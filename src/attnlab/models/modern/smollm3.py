"""SmolLM3: Llama's decoder in which every fourth layer has no positions at all (NoPE; transformers'
``SmolLM3ForCausalLM``).

A NoPE layer (Kazemnejad et al., 2023, "The Impact of Positional Encoding on Length Generalization in
Transformers", arXiv:2305.19466) skips RoPE: its queries and keys are compared as they are projected, so its
scores depend on what the tokens are, not on how far apart. Order still reaches it, through the causal mask (a
query sees only what came before it) and through the layers below, which are rotated. SmolLM3 interleaves them,
three rotated layers and one NoPE layer, so that some layers attend by content at any distance, which helps it
carry its context to long inputs. In attnlab a NoPE layer is a block built without the model's rotary embedding
(:class:`~attnlab.layers.ModernBlockSpec`'s ``rope=False``); the rest is :class:`~attnlab.models.ModernDecoder`.

transformers writes ``no_rope_layers`` as one flag per layer, 1 where the layer *uses* RoPE; attnlab's config
lists the layers that do not, by index (:attr:`SmolLM3Config.nope_layers`).

Example:
    >>> from attnlab.models import ModernDecoder
    >>> model = ModernDecoder(SmolLM3Config.from_preset("baby", vocab_size=82))
    >>> [block.attn.rotary is None for block in model.blocks]
    [False, False, False, True]
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from attnlab.i18n import tr
from attnlab.layers import ModernBlockSpec
from attnlab.models.modern.decoder import ModernDecoderConfig

#: SmolLM3's rule when no list is given: every ``NOPE_INTERVAL``-th layer, counting from 1, is a NoPE layer
NOPE_INTERVAL = 4


def every_fourth(num_layers: int, interval: int = NOPE_INTERVAL) -> list[int]:
    """The NoPE layers of SmolLM3's rule: layers ``interval − 1``, ``2·interval − 1``, ... (transformers'
    ``no_rope_layer_interval``)."""
    return [i for i in range(num_layers) if (i + 1) % interval == 0]


@dataclass
class SmolLM3Config(ModernDecoderConfig):
    """A :class:`~attnlab.models.ModernDecoderConfig` with NoPE layers.

    Args:
        nope_layers: the indices of the layers that skip RoPE, each in ``[0, num_layers)``; None: SmolLM3's every
            fourth layer (3, 7, 11, ...).
        (the rest): :class:`~attnlab.models.ModernDecoderConfig`'s.
    """

    nope_layers: list[int] | None = None

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        # the modern baby with SmolLM3's pattern: layer 3 of 4 without RoPE
        "baby": dict(vocab_size=256, context_length=64, d_model=128, num_layers=4, num_heads=4, num_kv_heads=2,
                     d_ff=392, tie_weights=True),
        # HuggingFaceTB/SmolLM3-3B: 36 layers of 2048, 16 heads over 4, d_ff 11,008, vocab 128,256, RoPE base 5·10⁶,
        # every fourth layer NoPE, head tied
        "smollm3-3b": dict(vocab_size=128256, context_length=65536, d_model=2048, num_layers=36, num_heads=16,
                           num_kv_heads=4, d_ff=11008, rope_base=5000000.0, norm_eps=1e-6, tie_weights=True),
    }

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.nope_layers is None:
            self.nope_layers = every_fourth(self.num_layers)
        layers = self.nope_layers
        if not isinstance(layers, list | tuple) or any(
                isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < self.num_layers for i in layers) \
                or len(set(layers)) != len(layers):
            raise ValueError(tr("{owner}: nope_layers must list distinct layer indices in [0, {num_layers}), got "
                                "{nope_layers!r}", owner=type(self).__name__, num_layers=self.num_layers,
                                nope_layers=layers))
        self.nope_layers = sorted(layers)

    def layer_spec(self, layer: int) -> ModernBlockSpec:
        """Llama's block; without RoPE where ``layer`` is one of :attr:`nope_layers`."""
        spec = super().layer_spec(layer)
        return dataclasses.replace(spec, rope=False) if layer in (self.nope_layers or ()) else spec

