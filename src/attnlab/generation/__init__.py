"""Text generation: sampling the next token, decoding with a KV cache (past the context window where positions
are rotary), ragged batches of prompts, streaming text, and greedy and beam search
for an encoder-decoder, and translating text with it."""

from attnlab.generation.config import GenerationConfig
from attnlab.generation.decode import generate, generate_stream
from attnlab.generation.loop import PositionTableWarning, cropping_expected
from attnlab.generation.sampling import check_sampling, filter_logits, sample_next_token
from attnlab.generation.seq2seq import beam_search, greedy_decode, length_penalty
from attnlab.generation.text import encode_prompt, generate_texts, stream_text
from attnlab.generation.translation import Translation, translate

__all__ = ["GenerationConfig", "PositionTableWarning", "Translation", "beam_search", "check_sampling",
           "cropping_expected", "encode_prompt", "filter_logits", "generate", "generate_stream", "generate_texts",
           "greedy_decode", "length_penalty", "sample_next_token", "stream_text", "translate"]
