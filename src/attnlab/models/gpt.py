"""GPT: a decoder-only Transformer (GPT-2's layout, nanoGPT's style).

    idx (B, T) -> token embedding + learned position -> N pre-LN causal blocks -> final LayerNorm
               -> head (by default the token embedding, transposed: weight tying) -> logits (B, T, vocab)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from torch import Tensor, nn

from attnlab.i18n import tr
from attnlab.layers import BlockSpec, LayerNorm, LearnedPositionalEmbedding, TransformerBlock
from attnlab.models.config import Presets, block_spec, common_checks
from attnlab.models.language_model import LanguageModel


@dataclass
class GPTConfig(Presets):
    """A GPT-style decoder (see :class:`attnlab.models.GPT`).

    Args:
        vocab_size: number of token ids.
        context_length: the most positions the model has (learned position table size).
        d_model: width of every token vector.
        num_layers: number of pre-LN causal blocks.
        num_heads: attention heads per block; must divide ``d_model``.
        d_ff: feed-forward hidden width; None means ``4 · d_model``.
        dropout: on embeddings, attention weights and sublayer outputs, training only.
        qkv_bias: biases on the query/key/value projections (GPT-2 has them).
        bias: biases on the attention output projection, the feed-forward maps and the LayerNorms
            (nanoGPT's ``bias=False`` is ``bias=False, qkv_bias=False``).
        activation: feed-forward non-linearity (GPT-2: ``"gelu_tanh"``).
        layer_norm_eps: LayerNorm epsilon.
        backend: attention backend for the blocks.
        tie_weights: the output head shares the token embedding's matrix (GPT-2); False gives the head its own.
        scale_attn_by_inverse_layer_idx: layer i's scores are also divided by i + 1 (a GPT-2 option, from the
            Mistral/Stanford CRFM runs, that keeps deep layers' scores small in half precision).
    """

    vocab_size: int
    context_length: int
    d_model: int
    num_layers: int
    num_heads: int
    d_ff: int | None = None
    dropout: float = 0.0
    qkv_bias: bool = False
    bias: bool = True
    activation: str = "gelu_tanh"
    layer_norm_eps: float = 1e-5
    backend: str = "auto"
    tie_weights: bool = True
    scale_attn_by_inverse_layer_idx: bool = False

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        # trains in seconds on a laptop CPU; byte-sized vocabulary by default
        "tiny": dict(vocab_size=256, context_length=32, d_model=32, num_layers=2, num_heads=2, qkv_bias=True),
        # nanoGPT's "baby" Shakespeare model
        "baby": dict(vocab_size=256, context_length=64, d_model=128, num_layers=4, num_heads=4, qkv_bias=True),
        "gpt2-small": dict(vocab_size=50257, context_length=1024, d_model=768, num_layers=12, num_heads=12,
                           qkv_bias=True),
        "gpt2-xl": dict(vocab_size=50257, context_length=1024, d_model=1600, num_layers=48, num_heads=25,
                        qkv_bias=True),
    }

    def __post_init__(self) -> None:
        if self.d_ff is None:
            self.d_ff = 4 * self.d_model if isinstance(self.d_model, int) else self.d_model
        common_checks(self, type(self).__name__)

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads

    def block_spec(self, layer: int) -> BlockSpec:
        """Layer ``layer``'s block: pre-LN, causal (with ``scale_attn_by_inverse_layer_idx`` its scores' factor
        also divided by ``layer + 1``)."""
        scale = self.head_dim ** -0.5 / (layer + 1) if self.scale_attn_by_inverse_layer_idx else None
        return block_spec(self, norm="pre", is_causal=True, qkv_bias=self.qkv_bias, bias=self.bias,
                          eps=self.layer_norm_eps, scale=scale)


class GPT(LanguageModel):
    """A GPT-2-style language model (the shared forward, decoding and caches: :class:`LanguageModel`).

    Example:
        >>> model = GPT(GPTConfig.from_preset("tiny"))
        >>> model(torch.zeros(2, 5, dtype=torch.long)).logits.shape      # (B, T, vocab)
        torch.Size([2, 5, 256])
    """

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        if not isinstance(config, GPTConfig):
            raise TypeError(tr("GPT: config must be a GPTConfig, got {config_type}", config_type=type(config).__name__))
        self.config = c = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.pos_emb = LearnedPositionalEmbedding(c.d_model, c.context_length)
        self.drop = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(TransformerBlock(c.block_spec(i)) for i in range(c.num_layers))
        self.ln_f = LayerNorm(c.d_model, eps=c.layer_norm_eps, bias=c.bias)  # pre-LN needs a last norm
        self.head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        if c.tie_weights:
            self.head.weight = self.tok_emb.weight  # weight tying: one matrix reads and writes tokens
        self.init_weights(residual_projections="linear2")

    def embed(self, idx: Tensor, positions: Tensor | None, offset: int) -> Tensor:
        """Token embedding + learned position: the table sliced from ``offset``, or gathered at ``positions``
        (each row's own, in a left-padded batch; the device's, in a compiled step)."""
        x = self.tok_emb(idx)
        return self.pos_emb(x, offset=offset) if positions is None else x + self.pos_emb.weight[positions]
