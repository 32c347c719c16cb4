"""Tiny random checkpoints of the decoder architectures, made and written by Hugging Face transformers.

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
# the newer families, each with what makes it itself: Qwen3's QK-norm; Gemma 2's soft-capping (attention and final
# logits, small caps so they bend), query_pre_attn_scalar, alternating local and global layers; Gemma 3's 5 local
# : 1 global layers with a RoPE base each, and QK-norm; Phi-3's fused projections, window and LongRoPE. Then the
# options the first four refused: Llama's mlp_bias, Qwen2's max_window_layers, GPT-2's scale_attn_by_inverse_layer_idx;
# and Gemma 3's larger models' scaled global RoPE
NEWER = ("qwen3", "gemma2", "gemma3", "phi3")
OPTIONS = ("llama-mlp-bias", "qwen2-mixed-windows", "gpt2-inverse-layer-scale", "gemma3-scaled-global")
# the attention of today's open models: DiffLlama's differential attention (4 pairs of heads over 2 + 2 key/value
# heads, λ_init at 4 depths); SmolLM3's NoPE layers (every fourth: layer 3 of 4) and, with its window option, a
# window on the NoPE layers
FAMILIES = ("diffllama", "smollm3", "smollm3-windowed")
# Gemma 4 (text): 6 layers, sliding (window 5) and global, global heads of 16 over 1 key/value head with k_eq_v and
# proportional RoPE over a quarter of their pairs, the last 2 layers reading layers 3's and 2's keys (a double-wide
# MLP), per-layer inputs of 8, final soft-cap; "gemma4-plain": the same without sharing, k_eq_v or per-layer inputs
GEMMA4 = ("gemma4", "gemma4-plain")


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
    return newer_config(arch, common)


def newer_config(arch: str, common: dict):
    transformers = pytest.importorskip("transformers")
    eager = dict(attn_implementation="eager")  # the reference's textbook path (its SDPA path ignores soft-caps)
    if arch == "qwen3":
        return transformers.Qwen3Config(**common, num_key_value_heads=2, head_dim=8, rms_norm_eps=1e-6,
                                        rope_parameters=dict(rope_type="default", rope_theta=10000.0), **eager)
    if arch == "gemma2":
        return transformers.Gemma2Config(**common, num_key_value_heads=2, head_dim=8, query_pre_attn_scalar=16,
                                         sliding_window=4, attn_logit_softcapping=3.0, final_logit_softcapping=2.0,
                                         **eager)
    if arch == "gemma3":
        return transformers.Gemma3TextConfig(
            **{**common, "num_hidden_layers": 6}, num_key_value_heads=1, head_dim=8, query_pre_attn_scalar=16,
            sliding_window=4, rope_parameters={"full_attention": dict(rope_type="default", rope_theta=50.0),
                                               "sliding_attention": dict(rope_type="default", rope_theta=10000.0)},
            **eager)
    if arch == "gemma3-scaled-global":  # Gemma 3 4B and up: linear RoPE scaling (here × 4) on the global layers only
        return transformers.Gemma3TextConfig(
            **{**common, "num_hidden_layers": 6}, num_key_value_heads=2, head_dim=8, query_pre_attn_scalar=8,
            sliding_window=3,
            rope_parameters={"full_attention": dict(rope_type="linear", rope_theta=1000.0, factor=4.0),
                             "sliding_attention": dict(rope_type="default", rope_theta=10000.0)},
            **eager)
    if arch == "phi3":
        # LongRoPE from 32 positions to 64: short factors up to 32 positions, long ones beyond, cos and sin × 1.095
        rope = dict(rope_type="longrope", rope_theta=10000.0, short_factor=[1.0, 1.3, 2.1, 3.4],
                    long_factor=[1.1, 2.5, 5.0, 9.0], original_max_position_embeddings=32)
        return transformers.Phi3Config(**common, num_key_value_heads=2, sliding_window=5,
                                       original_max_position_embeddings=32, rope_parameters=rope, **eager)
    if arch == "diffllama":
        return transformers.DiffLlamaConfig(**{**common, "num_hidden_layers": 4, "num_attention_heads": 8},
                                            num_key_value_heads=4, head_dim=8, rms_norm_eps=1e-5,
                                            rope_parameters=dict(rope_type="default", rope_theta=10000.0), **eager)
    if arch == "smollm3":
        return transformers.SmolLM3Config(**{**common, "num_hidden_layers": 4}, num_key_value_heads=2,
                                          rope_parameters=dict(rope_type="default", rope_theta=1000.0), **eager)
    if arch == "smollm3-windowed":
        return transformers.SmolLM3Config(**{**common, "num_hidden_layers": 4}, num_key_value_heads=2,
                                          no_rope_layers=[1, 0, 1, 0], use_sliding_window=True, sliding_window=5,
                                          rope_parameters=dict(rope_type="default", rope_theta=1000.0), **eager)
    if arch in GEMMA4:
        return gemma4_config(arch, common)
    if arch == "llama-mlp-bias":
        return transformers.LlamaConfig(**common, num_key_value_heads=2, mlp_bias=True, attention_bias=True)
    if arch == "qwen2-mixed-windows":
        return transformers.Qwen2Config(**{**common, "num_hidden_layers": 3}, num_key_value_heads=2,
                                        use_sliding_window=True, sliding_window=4, max_window_layers=1, **eager)
    if arch == "gpt2-inverse-layer-scale":
        return transformers.GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=3, n_head=4,
                                       bos_token_id=None, eos_token_id=None, scale_attn_by_inverse_layer_idx=True,
                                       **eager)
    raise ValueError(arch)


def gemma4_config(arch: str, common: dict):
    transformers = pytest.importorskip("transformers")
    full = arch == "gemma4"
    types = (["sliding_attention"] * 2 + ["full_attention"]) * 2
    return transformers.Gemma4TextConfig(
        **{**common, "num_hidden_layers": 6}, num_key_value_heads=2, head_dim=8, global_head_dim=16,
        num_global_key_value_heads=1 if full else None, attention_k_eq_v=full, layer_types=types, sliding_window=5,
        num_kv_shared_layers=2 if full else 0, use_double_wide_mlp=full, vocab_size_per_layer_input=VOCAB,
        hidden_size_per_layer_input=8 if full else 0, final_logit_softcapping=10.0 if full else None,
        rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                         "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                            "rope_theta": 1000000.0}},
        attn_implementation="eager")


def write_tokenizer(path: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator([TEXT], trainer)
    tok.save(str(path))


def order_one_weights(model: torch.nn.Module, seed: int, std: float | None = None) -> None:
    """Matrices N(0, std²) (None: 1/32), norm gains 1 + N(0, 0.2²), DiffLlama's λ vectors N(0, 0.3²), biases
    N(0, 0.1²): logits of order 1. A router's correction bias (a buffer) N(0, 0.1²): large enough to change which
    experts are chosen; Gemma 4's layer scalars 1 + N(0, 0.2²)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            if p.dim() >= 2:
                p.copy_(noise / 32**0.5 if std is None else noise * std)
            elif "lambda_" in name:  # DiffLlama's λ vectors: λ moves well away from λ_init
                p.copy_(0.3 * noise)
            elif "norm" in name or ".ln_" in name or name.endswith("ln_f.weight"):
                p.copy_(1 + 0.2 * noise if name.endswith("weight") else 0.1 * noise)
            else:
                p.copy_(0.1 * noise)
        for name, b in model.named_buffers():  # after the parameters: theirs are drawn as before
            if name.endswith("layer_scalar"):  # Gemma 4's per-layer scale, stored in the checkpoint
                b.copy_(1 + 0.2 * torch.randn(b.shape, generator=g))
            elif name.endswith("e_score_correction_bias"):
                b.copy_(0.1 * torch.randn(b.shape, generator=g))


def model_class(arch: str):
    transformers = pytest.importorskip("transformers")
    family = arch.split("-")[0]
    return {"gpt2": transformers.GPT2LMHeadModel, "llama": transformers.LlamaForCausalLM,
            "qwen2": transformers.Qwen2ForCausalLM, "mistral": transformers.MistralForCausalLM,
            "qwen3": transformers.Qwen3ForCausalLM, "gemma2": transformers.Gemma2ForCausalLM,
            "gemma3": transformers.Gemma3ForCausalLM, "phi3": transformers.Phi3ForCausalLM,
            "diffllama": transformers.DiffLlamaForCausalLM, "smollm3": transformers.SmolLM3ForCausalLM,
            "qwen3_next": transformers.Qwen3NextForCausalLM, "qwen3_5_text": transformers.Qwen3_5ForCausalLM,
            "qwen3_5_moe_text": transformers.Qwen3_5MoeForCausalLM, "gemma4": transformers.Gemma4ForCausalLM,
            "kimi_linear": transformers.KimiLinearForCausalLM}[family]


def write_checkpoint(arch: str, directory: Path, seed: int = 0, storage: str = "plain", config=None,
                     std: float | None = None):
    """Write a tiny ``arch`` checkpoint (``config``: a transformers config instead of :func:`hf_config`'s; ``std``:
    its matrices', :func:`order_one_weights`) into ``directory``; returns the transformers model (eval, float32).

    ``storage``: ``"plain"`` (one float32 file; Qwen2 sharded, as before), ``"sharded"`` (float32 in 20 KB shards)
    or ``"bf16"`` (one bfloat16 file: the model returned holds the same rounded weights, in float32)."""
    torch.manual_seed(seed)
    model = model_class(arch)(config or hf_config(arch)).eval()
    order_one_weights(model, seed, std)
    shard = {"max_shard_size": "20KB"} if arch == "qwen2" or storage == "sharded" else {}
    if storage == "bf16":  # the reference reads the file back (a cast of the model itself would round its RoPE table)
        model.to(torch.bfloat16).save_pretrained(directory)
        model = model_class(arch).from_pretrained(directory, dtype=torch.float32,
                                                  attn_implementation=model.config._attn_implementation).eval()
    else:
        model.save_pretrained(directory, **shard)
    write_tokenizer(directory / "tokenizer.json")
    model.generation_config.pad_token_id = 0
    model.generation_config.eos_token_id = None
    return model


def written_and_loaded(root: Path, cases, config_of=None, std: float | None = None) -> dict:
    """Each ``(arch, storage)`` of ``cases`` written into ``root`` (``config_of(arch)``: a transformers config
    instead of :func:`hf_config`'s; ``std``: the matrices') and loaded: ``(arch, storage) -> (directory,
    transformers model, attnlab model, tokenizer)``."""
    from attnlab.pretrained import load_causal_lm

    out = {}
    for arch, storage in cases:
        d = root / f"{arch}-{storage}"
        hf = write_checkpoint(arch, d, storage=storage, config=None if config_of is None else config_of(arch), std=std)
        out[arch, storage] = (d, hf, *load_causal_lm(d))
    return out


def left_padded(lengths, t, seed=0):
    """Random ids ``(B, t)`` whose row i has ``lengths[i]`` real tokens at the end; and the mask."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, VOCAB, (len(lengths), t), generator=g)
    mask = torch.zeros(len(lengths), t, dtype=torch.long)
    for i, n in enumerate(lengths):
        mask[i, t - n:] = 1
    return ids.masked_fill(mask == 0, 0), mask


def greedy_equals_generate(hf, model, config, max_new_tokens=40):
    """``model``'s greedy tokens (``generate`` with ``config``) equal transformers' ``generate`` for a prompt of 8
    alone and a left-padded batch of 9 and 4; returns ``[(ids, mask or None, transformers' tokens)]``."""
    from attnlab.generation import generate

    prompt = torch.randint(1, VOCAB, (1, 8), generator=torch.Generator().manual_seed(3))
    ids, mask = left_padded((9, 4), 9, seed=1)
    cases = []
    for idx, m in ((prompt, None), (ids, mask)):
        want = hf.generate(idx, attention_mask=m, max_new_tokens=max_new_tokens, do_sample=False)
        assert torch.equal(generate(model, idx, max_new_tokens, config, attention_mask=m), want)
        cases.append((idx, m, want))
    return cases


def hf_positions(mask):
    """transformers' generate: positions count the real tokens of each row."""
    return (mask.cumsum(-1) - 1).clamp(min=0)


def cached_and_full_logits(model, ids, mask, prefix):
    """The logits of ``ids (B, T)`` (padding ``mask``) computed twice: the first ``prefix`` tokens at once and then
    one token at a time through ``model.new_cache``, and in one forward without a cache."""
    with torch.no_grad():
        full = model(ids, attention_mask=mask).logits
        cache = model.new_cache(ids.shape[0])
        steps = [model(ids[:, :prefix], attention_mask=mask[:, :prefix], kv_cache=cache).logits]
        for t in range(prefix, ids.shape[1]):
            steps.append(model(ids[:, t : t + 1], attention_mask=mask[:, : t + 1], kv_cache=cache).logits)
    return torch.cat(steps, 1), full



def assert_left_padded_batch_equals(model, hf, atol: float, lengths=(24, 15, 6), seed: int = 0,
                                    alone_atol: float | None = None, alone_reference: bool = False) -> None:
    """A left-padded batch of ``lengths`` real tokens (24, 15 and 6): ``model``'s logits equal ``hf``'s
    (transformers') on every real token to ``atol``, and each row's equal its logits alone to ``alone_atol`` (None:
    ``atol``); the reference's logits of order 1. With ``alone_reference`` each row alone is compared with
    transformers' logits of that row alone instead (``atol``): where a padded row and the same row alone differ in
    the reference too (the delta rule's chunks start at other tokens)."""
    t = max(lengths)
    ids, mask = left_padded(lengths, t, seed)
    with torch.no_grad():
        got = model(ids, attention_mask=mask).logits
        want = hf(ids, attention_mask=mask, position_ids=hf_positions(mask)).logits
        assert want[mask.bool()].std() > 0.3  # logits of order 1: a wrong weight could not hide
        for i, n in enumerate(lengths):
            real = slice(t - n, t)
            torch.testing.assert_close(got[i, real], want[i, real], atol=atol, rtol=0)
            alone = model(ids[i : i + 1, real]).logits[0]
            if alone_reference:
                torch.testing.assert_close(alone, hf(ids[i : i + 1, real]).logits[0], atol=atol, rtol=0)
            else:
                torch.testing.assert_close(got[i, real], alone, atol=atol if alone_atol is None else alone_atol,
                                           rtol=0)
