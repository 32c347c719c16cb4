"""Mixed-precision training: bf16 autocast on the CPU (what CI can run), fp16's gradient scaler, exact resume."""

import json
import re

import pytest
import torch
from safetensors.torch import load_file

from attnlab.training import TrainConfig, Trainer, train
from attnlab.training import mixed_precision as mp
from attnlab.training.mixed_precision import MixedPrecision, allow_tf32


def last_checkpoint(out):
    return out / json.loads((out / "checkpoint.json").read_text())["latest"]


def resumed_equals_straight(tiny_config, tmp_path, dtype):
    """Train 12 steps straight, and 6 + 6 with a resume between: the same losses and weights, bit for bit."""
    model = {"context_length": 16, "dropout": 0.1}  # dropout on: the restored RNG state matters too
    straight = train(tiny_config(out=str(tmp_path / "a"), model=model, dtype=dtype), quiet=True)
    cfg = tiny_config(out=str(tmp_path / "b"), model=model, dtype=dtype)
    assert train(cfg, quiet=True, stop_at=6).step == 6
    resumed = train(cfg, resume=True, quiet=True)
    assert resumed.train_losses == straight.train_losses  # exactly: same floats, step by step
    a = load_file(last_checkpoint(tmp_path / "a") / "model.safetensors")
    b = load_file(last_checkpoint(tmp_path / "b") / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert all(t.dtype == torch.float32 for t in a.values())  # master weights and checkpoints stay fp32
    return straight


def test_bf16_resume_equals_uninterrupted_bitwise(tiny_config, tmp_path):
    bf16 = resumed_equals_straight(tiny_config, tmp_path, "bf16")
    state = json.loads((last_checkpoint(tmp_path / "b") / "state.json").read_text())
    assert state["train_config"]["dtype"] == "bf16" and state["grad_scaler"] == {}
    fp32 = train(tiny_config(out=str(tmp_path / "c"), model={"context_length": 16, "dropout": 0.1}), quiet=True)
    assert bf16.train_losses != fp32.train_losses  # autocast really ran ...
    assert abs(bf16.train_losses[0][1] - fp32.train_losses[0][1]) < 2e-2  # ... within bf16's rounding of fp32


def test_fp16_scaler_state_is_saved_and_resume_is_bitwise(tiny_config, tmp_path, monkeypatch):
    # fp16 is refused on the CPU (slow), but the scaler's bookkeeping is device-independent: allow it here
    monkeypatch.setattr(mp, "CPU_DTYPES", ("fp32", "bf16", "fp16"))
    resumed_equals_straight(tiny_config, tmp_path, "fp16")
    state = json.loads((last_checkpoint(tmp_path / "b") / "state.json").read_text())
    assert state["grad_scaler"]["scale"] > 0 and "_growth_tracker" in state["grad_scaler"]


def test_a_resumed_fp16_run_continues_from_the_saved_scale(tiny_config, monkeypatch):
    monkeypatch.setattr(mp, "CPU_DTYPES", ("fp32", "bf16", "fp16"))
    cfg = tiny_config(dtype="fp16", max_iters=4)
    first = Trainer(cfg, quiet=True)
    first.precision.load_state_dict({**first.precision.state_dict(), "scale": 1024.0})  # as after overflows
    first.train()
    saved = first.precision.state_dict()
    resumed = Trainer(cfg, resume=True, quiet=True)
    assert resumed.precision.state_dict() == saved and saved["scale"] != 65536.0


def test_fp16_on_the_cpu_is_refused_before_any_work(tiny_config):
    message = ("dtype: 'fp16' needs a CUDA device (torch's CPU float16 kernels are emulated on most CPUs, many "
               "times slower than float32), got device cpu; on the CPU use 'fp32' or 'bf16'")
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        Trainer(tiny_config(dtype="fp16", device="cpu"), quiet=True)


@pytest.mark.parametrize("dtype", ["fp8", "float16", "BF16"])
def test_an_unknown_dtype_is_named(dtype):
    with pytest.raises(ValueError, match=f"^dtype: expected one of 'fp32', 'bf16', 'fp16', got '{dtype}'$"):
        TrainConfig(dtype=dtype)


def test_autocast_is_off_for_fp32_and_on_for_bf16():
    x = torch.randn(4, 4)
    with MixedPrecision("fp32", torch.device("cpu")).autocast():
        assert (x @ x).dtype == torch.float32
    with MixedPrecision("bf16", torch.device("cpu")).autocast():
        assert (x @ x).dtype == torch.bfloat16


def test_tf32_is_allowed_on_cuda_only():
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    before = matmul.allow_tf32, cudnn.allow_tf32
    try:
        matmul.allow_tf32 = cudnn.allow_tf32 = False
        allow_tf32(torch.device("cpu"))
        assert not matmul.allow_tf32 and not cudnn.allow_tf32
        allow_tf32(torch.device("cuda", 0))  # sets two flags: no GPU needed
        assert matmul.allow_tf32 and cudnn.allow_tf32
    finally:
        matmul.allow_tf32, cudnn.allow_tf32 = before
