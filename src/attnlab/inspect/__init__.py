"""Look inside attention: one capture of a forward pass, and the arithmetic of it step by step."""

from attnlab.inspect.capture import Capture, capture, max_length
from attnlab.inspect.encoder_decoder import Seq2SeqCapture, capture_translation, explain_cross
from attnlab.inspect.explain import Explanation, explain
from attnlab.inspect.names import shown_name
from attnlab.inspect.random_model import MECHANISMS, RandomModel, RandomModelConfig

__all__ = [
    "MECHANISMS",
    "Capture",
    "Explanation",
    "RandomModel",
    "RandomModelConfig",
    "Seq2SeqCapture",
    "capture",
    "capture_translation",
    "explain",
    "explain_cross",
    "max_length",
    "shown_name",
]
