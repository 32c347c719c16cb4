"""Tiny random checkpoints of the four decoder architectures, made and written by Hugging Face transformers.

``write_checkpoint(arch, directory)`` builds a small random model with transformers, gives it weights of order 1
(transformers' own init, std 0.02, makes every logit nearly 0, and a comparison that passes on zeros proves
nothing), writes it with ``save_pretrained`` (safetensors; Qwen2 in shards) and adds a ``tokenizer.json``.
"""

from pathlib import Path

import pytest
import torch

VOCAB = 300  # a byte-level BPE needs its 256 bytes, plus a few merges
TEXT = ("To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer the slings and "
        "arrows of outrageous fortune, or to take arms against a sea of troubles. 我爱学习。") * 4

# each architecture with what makes it itself: Llama 3's llama3 RoPE scaling and tied head, Qwen2's q/k/v biases
# and one key/value head (MQA), Mistral's sliding window (4 keys, far shorter than the sequences tested)
ARCHS = ("gpt2", "llama", "qwen2", "mistral")


def hf_config(arch: str):
    transformers = pytest.importorskip("transformers")
    common = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                  max_position_embeddings=64, bos_token_id=None, eos_token_id=None, pad_token_id=None)
    if arch == "gpt2":
        return transformers.GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=2, n_head=4,
                                       bos_token_id=None, eos_token_id=None)
    if arch == "llama":
        return transformers.LlamaConfig(**common, num_key_value_heads=2, tie_word_embeddings=True,
                                        rope_parameters=dict(rope_type="llama3", rope_theta=500000.0, factor=4.0,
                                                             low_freq_factor=1.0, high_freq_factor=4.0,
                                                             original_max_position_embeddings=16))
    if arch == "qwen2":
        return transformers.Qwen2Config(**common, num_key_value_heads=1, rms_norm_eps=1e-6,
                                        rope_parameters=dict(rope_type="default", rope_theta=1000000.0))
    if arch == "mistral":
        return transformers.MistralConfig(**common, num_key_value_heads=2, sliding_window=4, rms_norm_eps=1e-5)
    raise ValueError(arch)


def write_tokenizer(path: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator([TEXT], trainer)
    tok.save(str(path))


def order_one_weights(model: torch.nn.Module, seed: int) -> None:
    """Matrices N(0, 1/32), norm gains 1 + N(0, 0.2²), biases N(0, 0.1²): logits of order 1."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            if p.dim() >= 2:
                p.copy_(noise / 32**0.5)
            elif "norm" in name or ".ln_" in name or name.endswith("ln_f.weight"):
                p.copy_(1 + 0.2 * noise if name.endswith("weight") else 0.1 * noise)
            else:
                p.copy_(0.1 * noise)


def write_checkpoint(arch: str, directory: Path, seed: int = 0, config=None):
    """Write a tiny ``arch`` checkpoint (``config``: a transformers config instead of :func:`hf_config`'s) into
    ``directory``; returns the transformers model (eval, float32)."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(seed)
    cls = {"gpt2": transformers.GPT2LMHeadModel, "llama": transformers.LlamaForCausalLM,
           "qwen2": transformers.Qwen2ForCausalLM, "mistral": transformers.MistralForCausalLM}[arch]
    model = cls(config or hf_config(arch)).eval()
    order_one_weights(model, seed)
    shard = {"max_shard_size": "20KB"} if arch == "qwen2" else {}
    model.save_pretrained(directory, **shard)
    write_tokenizer(directory / "tokenizer.json")
    model.generation_config.pad_token_id = 0
    model.generation_config.eos_token_id = None
    return model
