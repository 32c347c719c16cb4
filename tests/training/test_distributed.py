"""Two processes under torchrun (gloo) train the same weights as one process with the same global batch."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

ATTNLAB = str(Path(sys.executable).with_name("attnlab"))
ARGS = ["--preset", "tiny", "--context-length", "16", "--max-iters", "6", "--batch-size", "4", "--grad-accum", "2",
        "--eval-interval", "3", "--eval-iters", "2", "--warmup-iters", "2", "--seed", "3", "-q"]


def final(out: Path):
    ckpt = out / json.loads((out / "checkpoint.json").read_text())["latest"]
    return load_file(ckpt / "model.safetensors"), json.loads((ckpt / "state.json").read_text())


@pytest.mark.slow
def test_two_processes_match_one(corpus, tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    one, two = tmp_path / "one", tmp_path / "two"
    subprocess.run([ATTNLAB, "train", "--data", str(corpus), "--out", str(one), *ARGS], check=True, env=env)
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                          "--no-python", ATTNLAB, "train", "--data", str(corpus), "--out", str(two), *ARGS],
                         env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    (w1, s1), (w2, s2) = final(one), final(two)
    assert (s1["world_size"], s2["world_size"]) == (1, 2)
    assert s1["step"] == s2["step"] == 6
    for name in w1:
        torch.testing.assert_close(w2[name], w1[name], rtol=0, atol=1e-6, msg=name)
    for (_, a), (_, b) in zip(s1["history"]["train"], s2["history"]["train"], strict=True):
        assert abs(a - b) <= 1e-6
    assert "step" not in run.stdout  # only the first process may print, and -q silences it


@pytest.mark.slow
def test_two_processes_match_one_for_a_translation_model(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    args = ["--task", "numbers", "--d-model", "32", "--num-heads", "2", "--num-encoder-layers", "1",
            "--num-decoder-layers", "1", "--d-ff", "64", "--context-length", "24", "--dropout", "0", "--steps", "6",
            "--batch-size", "4", "--grad-accum", "2", "--eval-interval", "3", "--eval-iters", "2", "--warmup", "2",
            "--train-pairs", "100", "--val-pairs", "10", "--seed", "3", "-q"]
    one, two = tmp_path / "one", tmp_path / "two"
    subprocess.run([ATTNLAB, "train-seq2seq", "--out", str(one), *args], check=True, env=env)
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                          "--no-python", ATTNLAB, "train-seq2seq", "--out", str(two), *args],
                         env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    (w1, s1), (w2, s2) = final(one), final(two)
    assert (s1["world_size"], s2["world_size"], s1["architecture"]) == (1, 2, "transformer")
    for name in w1:
        torch.testing.assert_close(w2[name], w1[name], rtol=0, atol=1e-5, msg=name)
