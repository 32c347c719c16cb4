"""On a GPU: a training run per dtype (fp32 with TF32, bf16 and fp16 autocast), checkpoints in float32.

Marked ``cuda`` and skipped (with the reason) where there is none; CI never has one. Bit-exact resume is proven on
the CPU (test_mixed_precision.py): on a GPU some backward kernels (embedding gradients) sum with atomics, so two
runs need not agree to the last bit.
"""

import json

import pytest
import torch
from safetensors.torch import load_file

from attnlab.training import Trainer, train

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(),
                                                   reason="needs an NVIDIA GPU (torch.cuda.is_available() is False)")]


@pytest.fixture(autouse=True)
def keep_tf32_flags():
    """The trainer allows TF32 process-wide; put the flags back for the tests that follow."""
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    before = matmul.allow_tf32, cudnn.allow_tf32
    yield
    matmul.allow_tf32, cudnn.allow_tf32 = before


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
def test_a_training_run_per_dtype(tiny_config, tmp_path, dtype):
    cfg = tiny_config(out=str(tmp_path / dtype), device="cuda", dtype=dtype, max_iters=40, eval_interval=20,
                      learning_rate=3e-3, min_lr=3e-4, model={"context_length": 16, "dropout": 0.1})
    result = train(cfg, quiet=True)
    losses = [v for _, v in result.train_losses]
    assert all(torch.isfinite(torch.tensor(losses)))
    assert sum(losses[-5:]) / 5 < 0.8 * sum(losses[:5]) / 5  # it learns, in every dtype
    ckpt = result.checkpoint
    assert all(t.dtype == torch.float32 for t in load_file(ckpt / "model.safetensors").values())
    state = json.loads((ckpt / "state.json").read_text())
    assert (state["grad_scaler"] != {}) == (dtype == "fp16")
    assert torch.backends.cuda.matmul.allow_tf32  # allowed on CUDA, for every dtype


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_the_forward_runs_in_the_dtype_and_the_master_weights_stay_float32(tiny_config, tmp_path, dtype):
    trainer = Trainer(tiny_config(out=str(tmp_path / dtype), device="cuda", dtype=dtype), quiet=True)
    batch = trainer.draw_batch("train", torch.Generator().manual_seed(0))
    with trainer.precision.autocast():
        logits = trainer.model(batch[0]).logits
    assert logits.dtype == {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    trainer.train_step()
    assert all(p.dtype == torch.float32 for p in trainer.model.parameters())
