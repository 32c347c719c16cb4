"""The parts of the parallel layouts that need no second process: activation checkpointing, the tensor-parallel
plan and its checks, the mesh's shape, the memory formula's pieces, and export."""

import pytest
import torch
from safetensors.torch import load_file

from attnlab.models import GPT, GPTConfig, ModernDecoder, ModernDecoderConfig, load_trained
from attnlab.training import TrainConfig, train
from attnlab.training.distributed_checkpoint import export
from attnlab.training.footprint import activation_bytes, block_activations, state_bytes
from attnlab.training.parallel import (
    checkpoint_activations,
    mesh_shape,
    split_parameters,
    tensor_parallel_plan,
)

MODELS = {
    "gpt": lambda **kw: GPT(GPTConfig.from_preset("tiny", **kw)),
    "modern": lambda **kw: ModernDecoder(ModernDecoderConfig.from_preset("tiny", **kw)),
}


def gradients(model: torch.nn.Module, idx: torch.Tensor) -> dict[str, torch.Tensor]:
    model.train()
    torch.manual_seed(7)  # the same dropout masks in both runs
    model(idx, targets=idx.roll(-1, 1)).loss.backward()
    return {name: p.grad.clone() for name, p in model.named_parameters()}


@pytest.mark.parametrize("arch", list(MODELS))
def test_activation_checkpointing_gives_the_same_gradients(arch):
    torch.manual_seed(0)
    plain = MODELS[arch](dropout=0.1)
    recomputed = MODELS[arch](dropout=0.1)
    recomputed.load_state_dict(plain.state_dict())
    checkpoint_activations(recomputed)
    idx = torch.randint(0, 256, (3, 16))
    want, got = gradients(plain, idx), gradients(recomputed, idx)
    assert recomputed.state_dict().keys() == plain.state_dict().keys()  # checkpoints unchanged
    for name in want:
        torch.testing.assert_close(got[name], want[name], rtol=0, atol=1e-6, msg=name)


def test_activation_checkpointing_keeps_only_each_blocks_input():
    """What autograd saves for backward: every block's tensors without it, one input per block with it."""
    torch.manual_seed(0)
    model = MODELS["gpt"](num_layers=4)
    idx = torch.randint(0, 256, (2, 16))

    def saved_bytes() -> int:
        total = []

        def pack(t):
            total.append(t.numel() * t.element_size())
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            model(idx, targets=idx)
        return sum(total)

    before = saved_bytes()
    checkpoint_activations(model)
    assert saved_bytes() < 0.5 * before


def test_the_plan_splits_heads_and_hidden_units():
    model = MODELS["modern"]()
    plan = tensor_parallel_plan(model, 2)
    styles = {name: type(style).__name__ for name, style in plan.items()}
    assert styles["blocks.0.attn.W_query"] == styles["blocks.0.attn.W_key"] == "ColwiseParallel"
    assert styles["blocks.1.attn.out_proj"] == styles["blocks.1.ff.down_proj"] == "RowwiseParallel"
    assert styles["blocks.1.ff.gate_proj"] == styles["blocks.1.ff.up_proj"] == "ColwiseParallel"
    assert len(plan) == 2 * (4 + 3)  # two blocks, four attention maps and three feed-forward ones each


@pytest.mark.parametrize(("arch", "overrides", "tp", "words"), [
    ("gpt", {"num_heads": 4}, 3, ["tp_size", "num_heads = 4", "3 processes", "blocks.0.attn"]),
    ("modern", {}, 4, ["num_kv_heads = 2", "4 processes"]),       # 4 query heads divide, 2 key/value heads do not
    ("modern", {"d_ff": 90}, 4, ["num_kv_heads = 2"]),
    ("modern", {"num_kv_heads": 4, "d_ff": 90}, 4, ["d_ff = 90", "4 processes"]),
])
def test_heads_that_do_not_divide_are_named(arch, overrides, tp, words):
    with pytest.raises(ValueError) as err:
        tensor_parallel_plan(MODELS[arch](**overrides), tp)
    for word in words:
        assert word in str(err.value), str(err.value)


@pytest.mark.parametrize(("mode", "tp", "world", "shape"), [
    ("ddp", None, 4, (4, 1)), ("fsdp", None, 4, (4, 1)), ("tp", None, 4, (1, 4)), ("fsdp+tp", 2, 8, (4, 2)),
    ("fsdp+tp", 1, 2, (2, 1)), ("fsdp+tp", 2, 2, (1, 2)),
])
def test_the_mesh(mode, tp, world, shape):
    assert mesh_shape(mode, tp, world) == shape


@pytest.mark.parametrize(("mode", "tp", "world", "words"), [
    ("fsdp+tp", 3, 4, ["4 processes", "--tp-size 3"]),
    ("fsdp+tp", None, 4, ["--tp-size"]),
    ("tp", 2, 4, ["all 4 processes", "--tp-size 2", "fsdp+tp"]),
    ("fsdp", 2, 4, ["--parallel fsdp", "got 2"]),
    ("pipeline", None, 4, ["parallel", "'pipeline'", "'fsdp+tp'"]),
])
def test_a_mesh_that_cannot_be_built_is_refused(mode, tp, world, words):
    with pytest.raises(ValueError) as err:
        mesh_shape(mode, tp, world)
    for word in words:
        assert word in str(err.value), str(err.value)


@pytest.mark.parametrize("arch", list(MODELS))
def test_split_parameters_by_hand(arch):
    model = MODELS[arch]()
    split, rest = split_parameters(model)
    c = model.config
    if arch == "gpt":  # q, k, v with biases, out_proj's weight; the FFN's first map with bias, the second's weight
        per_block = 3 * (32 * 32 + 32) + 32 * 32 + (32 * 128 + 128) + 128 * 32
    else:  # q 32x32, k and v 16x32, out_proj 32x32, three 32x88 maps: no biases
        per_block = 32 * 32 + 2 * 16 * 32 + 32 * 32 + 3 * 32 * 88
    assert split == c.num_layers * per_block
    assert split + rest == sum(p.numel() for p in model.parameters())
    assert state_bytes(split, rest, 2, 2) == 16 * (split / 4 + rest / 2)


def test_block_activations_by_hand():
    gpt = GPTConfig.from_preset("gpt2-small")          # 4h kept whole; h + 3h + 2·4h split
    assert block_activations(gpt) == 768 * (4 + 1 + 3 + 8)
    assert block_activations(gpt, tp=4) == 768 * 4 + 768 * 12 // 4
    llama = ModernDecoderConfig.from_preset("llama-3.2-1b")  # q 2048, k and v 512 each, 4·8192 SwiGLU tensors
    assert block_activations(llama) == 4 * 2048 + 2048 + 2048 + 2 * 512 + 4 * 8192
    tokens = 1024
    assert activation_bytes(gpt, tokens) == tokens * (12 * 2 * block_activations(gpt) + 8 * 50257)
    assert activation_bytes(gpt, tokens, checkpointing=True) == tokens * (
        12 * 768 * 2 + 2 * block_activations(gpt) + 8 * 50257)


def test_export_of_a_plain_run_loads_as_the_run(tmp_path, corpus, one_thread):
    out = tmp_path / "run"
    train(TrainConfig(data=str(corpus), out=str(out), preset="tiny", model={"context_length": 16}, max_iters=2,
                      batch_size=2, eval_interval=2, eval_iters=1, warmup_iters=1), quiet=True)
    path = export(out, tmp_path / "model.safetensors")
    model, tokenizer = load_trained(path)
    reference, same = load_trained(out)
    assert tokenizer.to_json() == same.to_json()
    for name, value in reference.state_dict().items():
        assert torch.equal(model.state_dict()[name], value), name
    assert set(load_file(path)) <= set(reference.state_dict())


@pytest.mark.parametrize("page", ["scale.md", "zh/scale.md"])
def test_the_docs_tables_are_the_formulas(page):
    from pathlib import Path

    from attnlab.training.scale import activations_table, states_table

    text = (Path(__file__).resolve().parents[2] / "docs" / page).read_text(encoding="utf-8")
    assert states_table() in text and activations_table() in text


def test_fsdp_outside_torchrun_runs_as_one_process_and_its_export_is_read(tmp_path, corpus, one_thread):
    """``--parallel fsdp`` without torchrun says so and trains as one process; its sharded checkpoint, exported,
    is what ``sample``, ``heatmap`` and ``view`` read, and it samples what the checkpoint's weights do."""
    from click.testing import CliRunner

    from attnlab.cli import main
    from attnlab.training.distributed_checkpoint import load_sharded

    out, file = tmp_path / "run", tmp_path / "model.safetensors"
    run = CliRunner().invoke(main, ["train", "--data", str(corpus), "--out", str(out), "--preset", "tiny",
                                    "--context-length", "16", "--batch-size", "2", "--max-iters", "2",
                                    "--eval-interval", "2", "--eval-iters", "1", "--parallel", "fsdp"])
    assert run.exit_code == 0, run.output
    assert "--parallel fsdp outside torchrun: training as one process" in run.output
    assert (out / "checkpoints" / "step_0000002" / "sharded" / ".metadata").is_file()
    assert not (out / "checkpoints" / "step_0000002" / "model.safetensors").exists()
    run = CliRunner().invoke(main, ["export", "--checkpoint", str(out), "--out", str(file)])
    assert run.exit_code == 0 and str(file) in run.output, run.output
    model, _ = load_trained(file)
    plain = GPT(model.config)
    optimizer = torch.optim.AdamW(plain.parameters())
    load_sharded(out / "checkpoints" / "step_0000002", plain, optimizer)  # the shards, read whole by one process
    for name, value in plain.state_dict().items():
        assert torch.equal(model.state_dict()[name], value), name
    assert optimizer.state  # AdamW's moments came back too
    for args in (["sample", "--checkpoint", str(file), "--max-new-tokens", "5", "--temperature", "0", "But"],
                 ["heatmap", "But soft", "--model", str(file), "-o", str(tmp_path / "h.png")],
                 ["view", "But soft", "--model", str(file), "-o", str(tmp_path / "v.html")]):
        run = CliRunner().invoke(main, args)
        assert run.exit_code == 0, (args[0], run.output)
    assert (tmp_path / "h.png").stat().st_size > 0 and (tmp_path / "v.html").stat().st_size > 0


def test_fsdp_under_bf16_computes_in_bf16_and_keeps_fp32_weights(tmp_path, corpus, one_thread):
    """FSDP2's mixed-precision policy: the maps run on bfloat16 weights, the sharded master weights and AdamW's
    moments stay float32, and the losses follow the fp32 run's to bf16's precision."""
    from attnlab.training.distributed import teardown_distributed
    from attnlab.training.trainer import Trainer

    def run(name: str, **more):
        return Trainer(TrainConfig(data=str(corpus), out=str(tmp_path / name), preset="tiny", max_iters=4,
                                   model={"context_length": 16, "dropout": 0.0}, batch_size=4, eval_interval=4,
                                   eval_iters=1, warmup_iters=1, **more), quiet=True)

    try:
        trainer = run("bf16", parallel="fsdp", dtype="bf16")
        seen = []
        trainer.model.blocks[0].ff.linear1.register_forward_pre_hook(lambda m, args: seen.append(m.weight.dtype))
        losses = [loss for _, loss in trainer.train().train_losses]
    finally:
        teardown_distributed()
    assert seen and set(seen) == {torch.bfloat16}
    assert {p.dtype for p in trainer.model.parameters()} == {torch.float32}
    assert {v.dtype for s in trainer.optimizer.state.values() for k, v in s.items() if k != "step"} == {torch.float32}
    want = [loss for _, loss in run("fp32").train().train_losses]
    assert max(abs(a - b) for a, b in zip(losses, want, strict=True)) < 0.05
