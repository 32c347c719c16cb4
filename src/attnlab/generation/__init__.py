"""Text generation: sampling the next token, decoding with a KV cache, streaming text, and greedy and beam search
for an encoder-decoder."""

from attnlab.generation.decode import generate, generate_stream
from attnlab.generation.sampling import check_sampling, filter_logits, sample_next_token
from attnlab.generation.seq2seq import beam_search, greedy_decode, length_penalty
from attnlab.generation.text import encode_prompt, stream_text

__all__ = ["beam_search", "check_sampling", "encode_prompt", "filter_logits", "generate", "generate_stream",
           "greedy_decode", "length_penalty", "sample_next_token", "stream_text"]
