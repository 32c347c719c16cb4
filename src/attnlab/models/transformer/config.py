"""The original Transformer's configuration: a validated dataclass with the paper's presets.

``TransformerConfig.from_preset("transformer-base")`` is "Attention Is All You Need", Table 3, row *base*
(with its ~37,000-token shared vocabulary); ``"transformer-big"`` the *big* row; ``"transformer-tiny"`` and
``"transformer-small"`` train in minutes on a laptop CPU. Any field may be overridden by keyword.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from attnlab.arguments import check_positive_int
from attnlab.functional import BACKENDS
from attnlab.i18n import tr
from attnlab.layers.block import BlockSpec, Norm, check_norm
from attnlab.layers.feedforward import ACTIVATIONS
from attnlab.models.config import Presets, block_spec

#: the paper's shared vocabulary and depths (Table 3), common to its two presets
_PAPER = dict(vocab_size=37000, num_encoder_layers=6, num_decoder_layers=6)


@dataclass
class TransformerConfig(Presets):
    """An encoder-decoder Transformer (see :class:`attnlab.models.Transformer`).

    Args:
        vocab_size: number of token ids, shared by source and target (one embedding, tied to the output layer).
        d_model: width of every token vector; even (sinusoidal positions come in sin/cos pairs).
        num_heads: attention heads per attention; must divide ``d_model``.
        num_encoder_layers: encoder blocks (N in the paper).
        num_decoder_layers: decoder blocks.
        d_ff: feed-forward hidden width.
        dropout: on the embeddings, attention weights and every sublayer's output, training only.
        context_length: the longest source, and the longest target, the model accepts.
        norm: the paper's post-LN blocks (``"post"``) or pre-LN (``"pre"``).
        pad_id, bos_id, eos_id: padding, beginning-of-sequence (the decoder's first input) and end-of-sequence ids;
            three different ids in ``[0, vocab_size)``.
        backend: attention backend of every block.
        activation: feed-forward non-linearity (the paper: ``"relu"``).
        bias: biases on every projection and LayerNorm (``torch.nn.Transformer``'s default).
        layer_norm_eps: LayerNorm epsilon.
        final_norm: a LayerNorm after the last encoder block and after the last decoder block. None: only with
            ``norm="pre"`` (pre-LN needs it; the paper's post-LN blocks end in one already). ``torch.nn.Transformer``
            always has them, so :meth:`Transformer.from_torch` sets True.
    """

    vocab_size: int
    d_model: int = 512
    num_heads: int = 8
    num_encoder_layers: int = 6
    num_decoder_layers: int = 6
    d_ff: int = 2048
    dropout: float = 0.1
    context_length: int = 256
    norm: Norm = "post"
    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    backend: str = "auto"
    activation: str = "relu"
    bias: bool = True
    layer_norm_eps: float = 1e-5
    final_norm: bool | None = None

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        # a few seconds per hundred steps on two CPU cores; a byte-sized vocabulary until a tokenizer says otherwise
        "transformer-tiny": dict(vocab_size=256, d_model=64, num_heads=4, num_encoder_layers=2, num_decoder_layers=2,
                                 d_ff=256, dropout=0.1, context_length=128),
        # learns the dates and numbers tasks within minutes on two CPU cores
        "transformer-small": dict(vocab_size=256, d_model=128, num_heads=4, num_encoder_layers=3, num_decoder_layers=3,
                                  d_ff=512, dropout=0.1, context_length=128),
        # Table 3: N = 6, d_model = 512, d_ff = 2048, h = 8, P_drop = 0.1 (65 M parameters in the paper)
        "transformer-base": dict(_PAPER, d_model=512, num_heads=8, d_ff=2048, dropout=0.1),
        # Table 3: N = 6, d_model = 1024, d_ff = 4096, h = 16, P_drop = 0.3 (213 M parameters in the paper)
        "transformer-big": dict(_PAPER, d_model=1024, num_heads=16, d_ff=4096, dropout=0.3),
    }

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "num_heads", "num_encoder_layers", "num_decoder_layers", "d_ff",
                     "context_length"):
            check_positive_int("TransformerConfig", name, getattr(self, name), tr)
        if self.d_model % self.num_heads:
            raise ValueError(tr("TransformerConfig: d_model must be divisible by num_heads, got d_model={d_model}, "
                                "num_heads={num_heads}", d_model=self.d_model, num_heads=self.num_heads))
        if self.d_model % 2:
            raise ValueError(tr("TransformerConfig: d_model must be even (sinusoidal positions come in sin/cos "
                                "pairs), got {value}", value=self.d_model))
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, int | float) or not 0 <= self.dropout < 1:
            raise ValueError(tr("TransformerConfig: dropout must be a float in [0, 1), got {value!r}",
                                value=self.dropout))
        self._check_ids()
        check_norm("TransformerConfig", self.norm, tr)
        if not isinstance(self.bias, bool):
            raise ValueError(tr("TransformerConfig: {name} must be True or False, got {value!r}", name="bias",
                                value=self.bias))
        if self.final_norm is not None and not isinstance(self.final_norm, bool):
            raise ValueError(tr("TransformerConfig: final_norm must be None, True or False, got {value!r}",
                                value=self.final_norm))
        if self.backend not in BACKENDS:
            raise ValueError(tr("TransformerConfig: backend must be one of {choices}, got {value!r}",
                                choices=BACKENDS, value=self.backend))
        if self.activation not in ACTIVATIONS:
            raise ValueError(tr("TransformerConfig: activation must be one of {choices}, got {value!r}",
                                choices=ACTIVATIONS, value=self.activation))
        eps = self.layer_norm_eps
        if isinstance(eps, bool) or not isinstance(eps, int | float) or not eps > 0:
            raise ValueError(tr("TransformerConfig: layer_norm_eps must be a float > 0, got {value!r}", value=eps))

    def _check_ids(self) -> None:
        ids = {"pad_id": self.pad_id, "bos_id": self.bos_id, "eos_id": self.eos_id}
        for name, value in ids.items():
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < self.vocab_size:
                raise ValueError(tr("TransformerConfig: {name} must be an id in [0, vocab_size={vocab_size}), "
                                    "got {value!r}", name=name, vocab_size=self.vocab_size, value=value))
        if len(set(ids.values())) < 3:
            raise ValueError(tr("TransformerConfig: pad_id, bos_id and eos_id must be three different ids, got "
                                "{ids}", ids=ids))

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads

    @property
    def has_final_norm(self) -> bool:
        """Whether the encoder and decoder stacks end in a LayerNorm (``final_norm``, resolved)."""
        return self.norm == "pre" if self.final_norm is None else self.final_norm

    def block_spec(self) -> BlockSpec:
        """Every encoder and decoder block's spec (biases on every projection, as ``torch.nn.Transformer``)."""
        return block_spec(self, norm=self.norm, qkv_bias=self.bias, bias=self.bias, eps=self.layer_norm_eps)
