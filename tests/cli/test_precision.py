"""`attnlab train --dtype`, `attnlab sample --dtype --compile`: mixed precision and compiled decoding from the CLI."""

import json

import pytest

from attnlab.generation import compiled_decode
from tiny_runs import TEXT, TINY, run

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def bf16_run(tmp_path_factory):
    """A tiny model trained with bf16 autocast, shared by the sampling tests."""
    tmp = tmp_path_factory.mktemp("bf16")
    (tmp / "romeo.txt").write_text(TEXT)
    r = run("train", "--data", tmp / "romeo.txt", "--out", tmp / "run", *TINY, "--max-iters", 5, "--dtype", "bf16")
    assert r.exit_code == 0, r.output
    return tmp / "run"


def test_train_in_bf16_records_the_dtype(bf16_run):
    state = json.loads((bf16_run / json.loads((bf16_run / "checkpoint.json").read_text())["latest"]
                        / "state.json").read_text())
    assert state["train_config"]["dtype"] == "bf16" and state["step"] == 5


def test_a_bf16_checkpoint_samples_in_every_cpu_dtype_and_compiled(bf16_run, monkeypatch):
    monkeypatch.setattr(compiled_decode, "compile_options", lambda device: {"fullgraph": True, "backend": "aot_eager"})
    greedy = ["sample", "--checkpoint", bf16_run, "ROMEO", "--max-new-tokens", 20, "--temperature", 0]
    outputs = {}
    for extra in ([], ["--dtype", "fp32"], ["--dtype", "bf16"], ["--compile"]):
        r = run(*greedy, *extra)
        assert r.exit_code == 0, r.output
        assert r.stdout.startswith("ROMEO") and len(r.stdout) == len("ROMEO") + 20 + 1  # stderr: a note, cropping
        outputs[" ".join(extra)] = r.stdout
    assert outputs["--compile"] == outputs[""] == outputs["--dtype fp32"]  # compiled: the eager tokens


@pytest.mark.parametrize(("args", "message"), [
    (["train", "--dtype", "fp8"], "Invalid value for '--dtype': 'fp8' is not one of 'fp32', 'bf16', 'fp16'."),
    (["sample", "--dtype", "half"], "Invalid value for '--dtype': 'half' is not one of 'fp32', 'bf16', 'fp16'."),
])
def test_an_unknown_dtype_is_one_line(args, message, bf16_run):
    r = run(*args, "--checkpoint", bf16_run) if args[0] == "sample" else run(*args)
    assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output


def test_fp16_on_the_cpu_is_one_clear_line(bf16_run, tmp_path):
    (tmp_path / "romeo.txt").write_text(TEXT)
    r = run("train", "--data", tmp_path / "romeo.txt", "--out", tmp_path / "run", *TINY, "--max-iters", 2,
            "--dtype", "fp16", "--device", "cpu")
    assert r.exit_code == 1 and r.output.strip() == (
        "Error: dtype: 'fp16' needs a CUDA device (torch's CPU float16 kernels are emulated on most CPUs, many times "
        "slower than float32), got device cpu; on the CPU use 'fp32' or 'bf16'")
    r = run("sample", "--checkpoint", bf16_run, "ROMEO", "--dtype", "fp16")
    assert r.exit_code == 1 and r.output.strip() == (
        "Error: --dtype fp16 needs a CUDA device (torch's CPU float16 kernels are emulated on most CPUs, many times "
        "slower), got --device cpu; on the CPU use bf16 or fp32")


def test_a_dtype_in_a_config_file_is_checked(tmp_path):
    (tmp_path / "romeo.txt").write_text(TEXT)
    (tmp_path / "c.toml").write_text('dtype = "fp64"\n')
    r = run("train", "--data", tmp_path / "romeo.txt", "--out", tmp_path / "run", "--config", tmp_path / "c.toml",
            *TINY)
    assert r.exit_code == 1 and r.output.strip() == "Error: dtype: expected one of 'fp32', 'bf16', 'fp16', got 'fp64'"
