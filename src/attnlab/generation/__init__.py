"""Text generation: sampling the next token, decoding with a KV cache, and streaming text."""

from attnlab.generation.decode import generate, generate_stream
from attnlab.generation.sampling import check_sampling, filter_logits, sample_next_token
from attnlab.generation.text import encode_prompt, stream_text

__all__ = ["check_sampling", "encode_prompt", "filter_logits", "generate", "generate_stream", "sample_next_token",
           "stream_text"]
