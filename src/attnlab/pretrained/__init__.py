"""Real pretrained weights read offline from Hugging Face style directories: BERT-family encoders, and GPT-2,
Llama, Qwen2, Mistral, Qwen3, Gemma 2 and 3, Phi-3, DiffLlama and SmolLM3 language models."""

from attnlab.pretrained.bert import PretrainedBert, TokenBatch
from attnlab.pretrained.causal_lm import is_hf_model_dir, load_causal_lm
from attnlab.pretrained.load import load_bert, resolve_model_dir
from attnlab.pretrained.text_tokenizer import TextTokenizer

__all__ = ["PretrainedBert", "TextTokenizer", "TokenBatch", "is_hf_model_dir", "load_bert", "load_causal_lm",
           "resolve_model_dir"]
