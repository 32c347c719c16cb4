"""Weight-only quantization: each map against its own hand-quantized weight, whole models against fp32 (perplexity
and greedy tokens), and the refusals."""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attnlab.fast import accelerated, kernels
from attnlab.fast.quantized_linear import Int4Linear, Int8Linear
from attnlab.generation import GenerationConfig, generate
from attnlab.generation.quality import greedy_agreement, perplexity, prompts_from
from attnlab.models import GPT, SCHEMES, GPTConfig, ModernDecoder, ModernDecoderConfig, is_quantized, quantize
from attnlab.models.quantize import linears

TEXT = ("ROMEO: But, soft! what light through yonder window breaks? It is the east, and Juliet is the sun. "
        "Arise, fair sun, and kill the envious moon, who is already sick and pale with grief. ") * 20


def close(got, want):
    """fp32 products of length K: equal up to float rounding of the sums (1e-5 of the largest output)."""
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5 * want.abs().max().item())


def hand_int8(w):
    """Symmetric per-row int8, written out: the reference the kernel is checked against."""
    s = w.abs().amax(dim=1, keepdim=True) / 127
    return torch.round(w / s).clamp(-127, 127) * s


def hand_int4(w, group):
    """Asymmetric per-group 4-bit, written out, as torch's CPU int4 kernel reads it: codes 0..15 between each group's
    minimum and maximum, the weight ``(q − 8) · s + z`` with the scale ``s`` and the offset ``z = min + 8 s`` held in
    bfloat16 (the kernel's fast path takes its activations, scales and offsets in bf16)."""
    n, k = w.shape
    g = w.reshape(n, k // group, group)
    low, high = g.amin(-1, keepdim=True), g.amax(-1, keepdim=True)
    s = (high - low).clamp(min=1e-6) / 15
    q = torch.round((g - low) / s).clamp(0, 15)
    s16, z16 = s.bfloat16().float(), (low + 8 * s).bfloat16().float()
    return ((q - 8) * s16 + z16).reshape(n, k)


def bf16_close(got, want):
    """An output rounded once to bf16 (2⁻⁸ of the largest value), its fp32 sums aside."""
    torch.testing.assert_close(got, want, rtol=2**-7, atol=2**-7 * want.abs().max().item())


@pytest.mark.parametrize("kernel", ["attnlab", "aten", "converted"])
@pytest.mark.parametrize("shape", [(64, 128), (50, 256), (8, 32)])
def test_int8_linear_is_the_hand_quantized_product(shape, kernel, monkeypatch):
    """Every way of multiplying: attnlab's kernel (where it builds), torch's int8 kernel (taken on AVX-512 where
    ours is not built) and the converted weight (elsewhere)."""
    if kernel == "attnlab" and not kernels.load():  # built ahead of time by `attnlab kernels`, never here
        pytest.skip(f"attnlab's int8 kernel is not in use here: {kernels.status()}")
    if kernel != "attnlab":
        monkeypatch.setattr("attnlab.fast.quantized_linear.load_kernels", lambda: False)
        monkeypatch.setattr("attnlab.fast.quantized_linear.kernels_ready", lambda: False)
    monkeypatch.setattr("attnlab.fast.quantized_linear.int8_kernel_pays", lambda: kernel == "aten")
    g = torch.Generator().manual_seed(0)
    w, b, x = torch.randn(*shape, generator=g), torch.randn(shape[0], generator=g), torch.randn(3, 5, shape[1])
    q = Int8Linear(w, b)
    close(q(x), F.linear(x, hand_int8(w), b))
    rows, width = (-(-shape[0] // 4) * 4, -(-shape[1] // 16) * 16) if q.packed else shape  # the kernel's padding
    assert q.weight.dtype == torch.int8 and q.weight_bytes() == rows * width + 4 * shape[0]


@pytest.mark.parametrize(("shape", "group"), [((64, 128), 32), ((50, 256), 128), ((16, 64), 64)])
def test_int4_linear_is_the_hand_quantized_product(shape, group):
    """int4 runs with bf16 activations (torch's kernel's fast path; given fp32 it is a scalar loop): the product of
    the bf16 input and the hand-quantized weight, to one bf16 rounding of the output."""
    g = torch.Generator().manual_seed(1)
    w, x = torch.randn(*shape, generator=g), torch.randn(4, shape[1], generator=g)
    q = Int4Linear(w, None, group)
    want = F.linear(x.bfloat16().float(), hand_int4(w, group))
    bf16_close(q(x), want)
    assert q(x).dtype == torch.float32
    bf16_close(q.dequantized(), hand_int4(w, group))
    wrong = hand_int4(w, group * 2 if shape[1] % (group * 2) == 0 else group // 2)  # the control: another grouping
    with pytest.raises(AssertionError):
        bf16_close(q.dequantized(), wrong)
    n, k = -(-shape[0] // 16) * 16, shape[1]  # the kernel's rows, padded to sixteens
    assert q.weight_bytes() == n * k // 2 + (k // group) * n * 2 * 4  # half a byte a code, fp32 scale and offset


@pytest.mark.parametrize("cls", [Int8Linear, Int4Linear])
def test_bf16_inputs_give_bf16_outputs_within_bf16_rounding(cls):
    g = torch.Generator().manual_seed(2)
    w, x = torch.randn(32, 64, generator=g), torch.randn(3, 64, generator=g)
    q = cls(w, None, 32) if cls is Int4Linear else cls(w)
    y = q(x.bfloat16())
    assert y.dtype == torch.bfloat16
    torch.testing.assert_close(y.float(), q(x), rtol=2e-2, atol=2e-2 * q(x).abs().max().item())


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("make", ["gpt", "modern"])
def test_a_quantized_model_is_the_model_with_dequantized_weights(scheme, make):
    """Every linear map swapped, nothing else: equal to the fp32 model whose weights were quantized by hand."""
    torch.manual_seed(0)
    model = (GPT(GPTConfig(vocab_size=96, context_length=16, d_model=64, num_layers=2, num_heads=2)) if make == "gpt"
             else ModernDecoder(ModernDecoderConfig(vocab_size=96, context_length=16, d_model=64, num_layers=2,
                                                    num_heads=4, num_kv_heads=2, d_ff=128))).eval()
    reference = copy.deepcopy(model)
    reference.head.weight = nn.Parameter(reference.head.weight.detach().clone())  # untie: the embedding stays fp32
    with torch.no_grad():
        for _, _, _, linear in linears(reference):
            linear.weight.copy_(hand_int8(linear.weight) if scheme == "int8" else hand_int4(linear.weight, 32))
    quantize(model, scheme, group_size=32)
    assert is_quantized(model) and not linears(model)
    idx = torch.randint(0, 96, (2, 16))
    with torch.no_grad():
        got, want = model(idx).logits, reference(idx).logits
    if scheme == "int8":
        close(got, want)
    else:  # every map's input rounded to bf16 on the way, a few roundings deep: 1 % of the logits' spread
        torch.testing.assert_close(got, want, rtol=0, atol=1e-2 * (want.max() - want.min()).item())


@pytest.mark.parametrize(("n", "k"), [(32, 64), (50, 45)])
def test_stacked_int8_maps_give_each_map_s_numbers(n, k):
    """Int8Linear.stack: the codes and scales side by side, not quantized again: the same bits as each map alone."""
    g = torch.Generator().manual_seed(3)
    maps = [Int8Linear(torch.randn(n + i, k, generator=g), None if i == 1 else torch.randn(n + i, generator=g))
            for i in range(3)]
    x = torch.randn(5, k, generator=g)
    stacked = Int8Linear.stack(*maps)
    assert stacked.out_features == sum(m.out_features for m in maps)
    assert torch.equal(stacked(x), torch.cat([m(x) for m in maps], dim=-1))


@pytest.mark.parametrize("make", ["gpt", "modern"])
def test_inference_runs_q_k_v_as_one_int8_map(make):
    """A quantized model's fast twin (what generate runs) at inference stacks q, k and v (and a SwiGLU's gate and up)
    once and keeps the stack; with autograd on (no stacking) the logits are the same, and the plain model's too."""
    torch.manual_seed(0)
    model = quantize((GPT(GPTConfig(vocab_size=96, context_length=16, d_model=64, num_layers=2, num_heads=2))
                      if make == "gpt" else
                      ModernDecoder(ModernDecoderConfig(vocab_size=96, context_length=16, d_model=64, num_layers=2,
                                                        num_heads=4, num_kv_heads=2, d_ff=128))).eval(), "int8")
    fast = accelerated(model)
    idx = torch.randint(0, 96, (2, 16))
    with torch.enable_grad():
        separate = fast(idx).logits
    with torch.no_grad():
        fused, plain = fast(idx).logits, model(idx).logits
    kept = [m.__dict__["_fused_inference"].fused for m in fast.modules() if "_fused_inference" in m.__dict__]
    assert len(kept) == (2 if make == "gpt" else 4) and all(type(f) is Int8Linear for f in kept)
    assert not any("_fused_inference" in m.__dict__ for m in model.modules())  # the plain model is left as it is
    torch.testing.assert_close(fused, separate, rtol=1e-6, atol=1e-6 * separate.abs().max().item())
    torch.testing.assert_close(fused, plain, rtol=1e-6, atol=1e-6 * separate.abs().max().item())


def train_tiny_gpt(steps=300):
    """A small GPT trained on bytes of TEXT (a few seconds): a model whose predictions mean something."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=256, context_length=32, d_model=64, num_layers=2, num_heads=4))
    data = torch.tensor(list(TEXT.encode()))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(0)
    for _ in range(steps):
        starts = torch.randint(0, data.numel() - 33, (16,), generator=g)
        batch = torch.stack([data[s : s + 33] for s in starts.tolist()])
        loss = model(batch[:, :-1], targets=batch[:, 1:]).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval(), data


def test_int8_keeps_a_trained_gpt_within_one_percent_of_its_perplexity_and_its_greedy_tokens():
    model, data = train_tiny_gpt()
    quantized = quantize(copy.deepcopy(model), "int8")
    fp32, int8 = perplexity(model, data[:2000]), perplexity(quantized, data[:2000])
    assert fp32 < 3  # it learned the text: the comparison is between two models that predict it
    assert abs(int8 / fp32 - 1) < 0.01
    agree = greedy_agreement(model, quantized, prompts_from(data, 100, 8), 30)
    assert agree >= 0.9


def test_int8_keeps_a_loaded_checkpoint_within_one_percent_of_its_perplexity(tmp_path):
    from attnlab.pretrained.causal_lm import load_causal_lm
    from hf_checkpoints import write_checkpoint

    write_checkpoint("llama", tmp_path)
    model = load_causal_lm(tmp_path)[0]
    quantized = quantize(copy.deepcopy(model), "int8")
    tokens = torch.randint(0, model.config.vocab_size, (600,), generator=torch.Generator().manual_seed(0))
    fp32, int8 = perplexity(model, tokens), perplexity(quantized, tokens)
    assert abs(int8 / fp32 - 1) < 0.01
    assert greedy_agreement(model, quantized, prompts_from(tokens, 100, 8), 30) >= 0.5


def test_a_quantized_model_decodes_the_same_tokens_compiled():
    model = quantize(GPT(GPTConfig.from_preset("tiny")).eval(), "int8")
    idx = torch.randint(0, 256, (2, 5), generator=torch.Generator().manual_seed(3))
    eager = generate(model, idx, 12, GenerationConfig(temperature=0))
    assert torch.equal(generate(model, idx, 12, GenerationConfig(temperature=0, compile=True)), eager)


# ---------------------------------------------------------------- refusals
def tiny():
    return GPT(GPTConfig.from_preset("tiny")).eval()


def test_an_unknown_scheme_names_the_choices():
    with pytest.raises(ValueError, match=r"scheme must be one of \['int8', 'int4'\], got 'int3'"):
        quantize(tiny(), "int3")


def test_a_model_in_training_mode_is_refused():
    with pytest.raises(ValueError, match=r"GPT is in training mode; weight-only quantization is for inference"):
        quantize(GPT(GPTConfig.from_preset("tiny")), "int8")


def test_int4_names_the_layer_whose_inputs_the_group_does_not_divide():
    with pytest.raises(ValueError, match=r"layer blocks\.0\.attn\.W_query: its weight has shape \(32, 32\).*"
                                         r"group_size=128 must divide its 32 inputs"):
        quantize(tiny(), "int4")


def test_a_quantized_model_cannot_be_trained_or_quantized_again():
    model = quantize(tiny(), "int8")
    with pytest.raises(ValueError, match="quantized already"):
        quantize(model, "int8")
    idx = torch.zeros(1, 4, dtype=torch.long)
    model.train()
    with pytest.raises(ValueError, match="Int8Linear: a weight-only quantized model is for inference; it cannot be "
                                         "trained"):
        model(idx, targets=idx).loss.backward()
    with torch.no_grad():  # in training mode without autograd (dropout on, say): a forward pass, no training
        assert model(idx).logits.shape == (1, 4, 256)


def test_the_trainer_refuses_a_quantized_model(tmp_path):
    from attnlab.training import TrainConfig, Trainer

    class QuantizedTrainer(Trainer):
        def _build_model(self, model_config):
            return quantize(super()._build_model(model_config).eval(), "int8")

    (tmp_path / "corpus.txt").write_text(TEXT)
    config = TrainConfig(data=str(tmp_path / "corpus.txt"), out=str(tmp_path / "out"), preset="tiny", max_iters=2)
    with pytest.raises(ValueError, match="train: the model is weight-only quantized"):
        QuantizedTrainer(config, quiet=True)
    assert not (tmp_path / "out").exists()
