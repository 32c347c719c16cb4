"""Text generation: sampling the next token, and decoding with a KV cache."""

from attnlab.generation.decode import generate, generate_stream
from attnlab.generation.sampling import check_sampling, filter_logits, sample_next_token

__all__ = ["check_sampling", "filter_logits", "generate", "generate_stream", "sample_next_token"]
