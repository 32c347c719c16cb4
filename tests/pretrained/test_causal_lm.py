"""load_causal_lm: GPT-2, Llama, Qwen2 and Mistral checkpoints, written by transformers, computed as transformers does.

Each architecture is a tiny random model with weights of order 1 (tests/hf_checkpoints.py), saved with
``save_pretrained`` (Qwen2's in shards). Logits agree to 1e-4 (float32; the two compute the same sums in different
orders), with and without left padding; greedy decoding gives the same 30 tokens; the KV cache equals recomputing.
"""

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from attnlab.generation import GenerationConfig, generate
from attnlab.inspect import capture, explain
from attnlab.models import GPT, ModernDecoder
from attnlab.pretrained import load_causal_lm
from hf_checkpoints import ARCHS, VOCAB, hf_positions, left_padded, write_checkpoint

pytest.importorskip("transformers")
GREEDY = GenerationConfig(temperature=0)
UNCACHED = GREEDY.replace(use_cache=False)  # the whole window recomputed at every step
ATOL = 1e-4


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """arch -> (directory, transformers model); written once for the module."""
    root = tmp_path_factory.mktemp("hf")
    return {arch: (root / arch, write_checkpoint(arch, root / arch)) for arch in ARCHS}


@pytest.fixture(scope="module")
def loaded(checkpoints):
    return {arch: load_causal_lm(d) for arch, (d, _) in checkpoints.items()}


def test_each_architecture_becomes_the_right_model(loaded, checkpoints):
    kinds = {arch: type(model) for arch, (model, _) in loaded.items()}
    assert kinds == {"gpt2": GPT, "llama": ModernDecoder, "qwen2": ModernDecoder, "mistral": ModernDecoder}
    llama, qwen, mistral = (loaded[a][0].config for a in ("llama", "qwen2", "mistral"))
    assert (llama.num_kv_heads, llama.tie_weights, llama.rope_scaling["type"]) == (2, True, "llama3")
    assert (qwen.num_kv_heads, qwen.qkv_bias, qwen.rope_base) == (1, True, 1e6)
    assert mistral.sliding_window == 4
    assert loaded["llama"][0].head.weight is loaded["llama"][0].tok_emb.weight  # still tied after loading
    shards = sorted(p.name for p in checkpoints["qwen2"][0].glob("*.safetensors"))
    assert len(shards) > 1 and (checkpoints["qwen2"][0] / "model.safetensors.index.json").is_file()


@pytest.mark.parametrize("arch", ARCHS)
def test_logits_equal_transformers(arch, loaded, checkpoints):
    model, hf = loaded[arch][0], checkpoints[arch][1]
    ids = torch.randint(0, VOCAB, (2, 24))
    with torch.no_grad():
        got, want = model(ids).logits, hf(ids).logits
    assert want.std() > 0.5  # logits of order 1: a wrong weight could not hide
    torch.testing.assert_close(got, want, atol=ATOL, rtol=0)


@pytest.mark.parametrize("arch", ARCHS)
def test_left_padded_batch_equals_transformers_and_each_row_alone(arch, loaded, checkpoints):
    model, hf = loaded[arch][0], checkpoints[arch][1]
    lengths = (20, 13, 6)
    ids, mask = left_padded(lengths, 20)
    with torch.no_grad():
        got = model(ids, attention_mask=mask).logits
        want = hf(ids, attention_mask=mask, position_ids=hf_positions(mask)).logits
        for i, n in enumerate(lengths):
            real = slice(20 - n, 20)
            torch.testing.assert_close(got[i, real], want[i, real], atol=ATOL, rtol=0)
            alone = model(ids[i : i + 1, real]).logits[0]
            torch.testing.assert_close(got[i, real], alone, atol=ATOL, rtol=0)


@pytest.mark.parametrize("arch", ARCHS)
def test_greedy_30_tokens_equal_transformers(arch, loaded, checkpoints):
    model, hf = loaded[arch][0], checkpoints[arch][1]
    prompt = torch.randint(1, VOCAB, (1, 8))
    want = hf.generate(prompt, max_new_tokens=30, do_sample=False)
    assert torch.equal(generate(model, prompt, 30, GREEDY), want)
    ids, mask = left_padded((9, 4), 9, seed=1)
    want = hf.generate(ids, attention_mask=mask, max_new_tokens=30, do_sample=False)
    assert torch.equal(generate(model, ids, 30, GREEDY, attention_mask=mask), want)


@pytest.mark.parametrize("arch", ARCHS)
def test_kv_cache_equals_recomputation(arch, loaded):
    model = loaded[arch][0]
    ids, mask = left_padded((16, 11), 16, seed=2)
    with torch.no_grad():
        full = model(ids, attention_mask=mask).logits
        cache = model.new_cache(2)
        steps = [model(ids[:, :10], attention_mask=mask[:, :10], kv_cache=cache).logits]
        for t in range(10, 16):  # then one token at a time, the mask covering every cached key
            steps.append(model(ids[:, t : t + 1], attention_mask=mask[:, : t + 1], kv_cache=cache).logits)
    real = mask.bool()
    torch.testing.assert_close(torch.cat(steps, 1)[real], full[real], atol=1e-5, rtol=0)
    prompt = ids[:1, -7:]
    assert torch.equal(generate(model, prompt, 30, GREEDY), generate(model, prompt, 30, UNCACHED))


@pytest.mark.parametrize("arch", ARCHS)
def test_capture_and_explain_see_what_the_model_computed(arch, loaded):
    model, tokenizer = loaded[arch]
    cap = capture(model, "To be, or not to be, that is the question", tokenizer=tokenizer)
    assert cap.num_layers == 2 and cap.num_heads == 4 and cap.seq_len > 6
    assert cap.window == (4 if arch == "mistral" else None)
    for head in range(cap.num_heads):  # every query head, the grouped ones included, rotated by RoPE
        e = explain(cap, cap.seq_len - 1, layer=1, head=head)
        assert e.max_abs_diff_weights < 1e-5 and e.max_abs_diff_context < 1e-5
    if arch == "mistral":
        assert sum(e.allowed) == 4  # the window: its own and 3 keys before it


def test_the_tokenizer_is_the_checkpoints(loaded):
    _, tokenizer = loaded["llama"]
    text = "To be, or not to be: 我爱学习"
    assert tokenizer.decode(tokenizer.encode(text)) == text
    assert max(tokenizer.encode(text)) < VOCAB and tokenizer.id_to_token(tokenizer.encode(" be")[0]) == "Ġbe"


def test_config_before_transformers_5_loads_the_same_model(checkpoints, tmp_path, loaded):
    """rope_theta and rope_scaling at the top level, as checkpoints written before transformers 5 have them."""
    d = tmp_path / "old"
    shutil.copytree(checkpoints["llama"][0], d)
    raw = json.loads((d / "config.json").read_text())
    params = raw.pop("rope_parameters")
    raw["rope_theta"] = params.pop("rope_theta")
    raw["rope_scaling"] = {"type": params.pop("rope_type"), **params}
    (d / "config.json").write_text(json.dumps(raw))
    model, _ = load_causal_lm(d)
    assert model.config == loaded["llama"][0].config


# ---- bad input: a clear error, never a silently wrong model ------------------------------------------------------
def copy_with(checkpoints, tmp_path, arch="llama", config=None, tensors=None):
    """A copy of a checkpoint with config.json fields replaced and/or its single safetensors file rewritten."""
    d = tmp_path / f"{arch}-bad"
    shutil.copytree(checkpoints[arch][0], d)
    if config is not None:
        raw = json.loads((d / "config.json").read_text())
        (d / "config.json").write_text(json.dumps({**raw, **config}))
    if tensors is not None:
        save_file(tensors(load_file(d / "model.safetensors")), d / "model.safetensors")
    return d


def test_unsupported_architecture_names_it_and_the_supported(checkpoints, tmp_path):
    d = copy_with(checkpoints, tmp_path, config={"architectures": ["GemmaForCausalLM"], "model_type": "gemma"})
    with pytest.raises(ValueError, match=r"unsupported architecture \['GemmaForCausalLM'\].*supported: "
                                         r"DeepseekV2ForCausalLM, DeepseekV32ForCausalLM, DeepseekV3ForCausalLM, "
                                         r"DiffLlamaForCausalLM, GPT2LMHeadModel, Gemma2ForCausalLM, "
                                         r"Gemma3ForCausalLM, Gemma4ForCausalLM, KimiLinearForCausalLM, "
                                         r"LlamaForCausalLM, MistralForCausalLM, Phi3ForCausalLM, "
                                         r"Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen3NextForCausalLM, "
                                         r"Qwen3_5ForCausalLM, Qwen3_5MoeForCausalLM, SmolLM3ForCausalLM"):
        load_causal_lm(d)


def test_missing_tensor_is_named(checkpoints, tmp_path):
    name = "model.layers.1.mlp.up_proj.weight"
    d = copy_with(checkpoints, tmp_path, tensors=lambda t: {k: v for k, v in t.items() if k != name})
    with pytest.raises(ValueError, match=rf"missing tensor\(s\) \['{name}'\]"):
        load_causal_lm(d)


def test_wrong_shape_names_the_tensor_and_both_shapes(checkpoints, tmp_path):
    name = "model.layers.0.self_attn.k_proj.weight"  # 2 key/value heads of 8: (16, 32)
    d = copy_with(checkpoints, tmp_path, tensors=lambda t: {**t, name: torch.zeros(32, 32)})
    with pytest.raises(ValueError, match=rf"tensor '{name}' has shape \(32, 32\), but the model in config.json "
                                         r"expects \(16, 32\)"):
        load_causal_lm(d)


def test_gpt2_conv1d_shape_is_checked_as_stored(checkpoints, tmp_path):
    name = "transformer.h.0.attn.c_attn.weight"  # Conv1D: (in, out) = (32, 96)
    d = copy_with(checkpoints, tmp_path, arch="gpt2", tensors=lambda t: {**t, name: torch.zeros(96, 32)})
    with pytest.raises(ValueError, match=r"has shape \(96, 32\), but the model in config.json expects \(32, 96\)"):
        load_causal_lm(d)


def test_unexpected_tensor_is_named(checkpoints, tmp_path):
    extra = "model.layers.2.mlp.up_proj.weight"
    d = copy_with(checkpoints, tmp_path, tensors=lambda t: {**t, extra: torch.zeros(48, 32)})
    with pytest.raises(ValueError, match=rf"unexpected tensor '{extra}'"):
        load_causal_lm(d)


def test_a_tied_head_that_differs_from_the_embedding(checkpoints, tmp_path):
    d = copy_with(checkpoints, tmp_path, tensors=lambda t: {**t, "lm_head.weight": torch.zeros(VOCAB, 32)})
    with pytest.raises(ValueError, match=r"lm_head\.weight differs"):
        load_causal_lm(d)


@pytest.mark.parametrize(("config", "match"), [
    ({"rope_parameters": {"rope_type": "proportional", "rope_theta": 1e4, "factor": 4.0}},
     r"cannot honour rope type='proportional': supported: default, linear, dynamic, yarn, llama3, longrope"),
    ({"rope_parameters": {"rope_type": "linear", "rope_theta": 1e4, "factor": 2.0, "beta": 3}},
     r"cannot honour rope scaling=.*unknown keys \['beta'\]"),
    ({"partial_rotary_factor": 0.5}, r"cannot honour partial_rotary_factor=0.5"),
    ({"hidden_act": "gelu"}, r"cannot honour hidden_act='gelu'"),
    ({"use_mrope": True}, r"cannot honour use_mrope=True: attnlab does not implement this field of a llama config"),
    ({"num_key_value_heads": 3}, r"num_heads must be divisible by num_kv_heads, got num_heads=4, num_kv_heads=3"),
    ({"head_dim": 7}, r"head_dim must be even"),
    ({"hidden_size": None}, r"missing field 'hidden_size'"),
])
def test_config_fields_it_cannot_honour(checkpoints, tmp_path, config, match):
    with pytest.raises(ValueError, match=match):
        load_causal_lm(copy_with(checkpoints, tmp_path, config=config))


def test_gpt2_attention_variants_are_refused(checkpoints, tmp_path):
    d = copy_with(checkpoints, tmp_path, arch="gpt2", config={"scale_attn_weights": False})
    with pytest.raises(ValueError, match=r"cannot honour scale_attn_weights=False"):
        load_causal_lm(d)


def test_missing_and_corrupt_files(checkpoints, tmp_path):
    d = copy_with(checkpoints, tmp_path)
    (d / "tokenizer.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"missing tokenizer\.json"):
        load_causal_lm(d)
    d = copy_with(checkpoints, tmp_path / "2")
    (d / "model.safetensors").rename(d / "pytorch_model.bin")
    with pytest.raises(FileNotFoundError, match=r"missing model.safetensors.*pytorch_model.bin"):
        load_causal_lm(d)
    d = copy_with(checkpoints, tmp_path / "3")
    data = (d / "model.safetensors").read_bytes()
    (d / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="not a valid safetensors file"):
        load_causal_lm(d)
    d = copy_with(checkpoints, tmp_path / "4", arch="qwen2")
    next(d.glob("model-00001-*.safetensors")).unlink()
    with pytest.raises(FileNotFoundError, match=r"names shard\(s\) \['model-00001-"):
        load_causal_lm(d)
    with pytest.raises(FileNotFoundError, match="is not a directory"):
        load_causal_lm(tmp_path / "nowhere")
    (d / "config.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"missing config\.json"):
        load_causal_lm(d)
