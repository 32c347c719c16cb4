"""The original Transformer ("Attention Is All You Need"), an encoder-decoder, in one sub-package:

* ``config.py``: :class:`TransformerConfig` and the paper's presets;
* ``model.py``: :class:`Transformer`, its encoder and decoder stacks, ``encode`` / ``decode`` / ``forward``, and
  ``decode_step``, what greedy and beam search run at every step;
* ``checks.py``: what the model checks at its door (ids, padding masks, targets, memory) with one host read;
* ``head_mask.py``: :class:`Seq2SeqHeadMask`, one head mask per attention (encoder, decoder, cross);
* ``from_torch.py``: the configuration and weights of a ``torch.nn.Transformer``.
"""

from attnlab.models.transformer.config import TransformerConfig
from attnlab.models.transformer.head_mask import Seq2SeqHeadMask
from attnlab.models.transformer.model import Seq2SeqOutput, Transformer

__all__ = ["Seq2SeqHeadMask", "Seq2SeqOutput", "Transformer", "TransformerConfig"]
