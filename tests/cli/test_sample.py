"""``attnlab sample`` and the views on a modern decoder that ``attnlab train`` wrote, and on Hugging Face model
directories (GPT-2 and Llama checkpoints written by transformers)."""

import json

import pytest
from click.testing import CliRunner

from attnlab.cli import main
from hf_checkpoints import NEWER, write_checkpoint
from tiny_runs import TEXT, TINY, run

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def hf_dirs(tmp_path_factory):
    pytest.importorskip("transformers")
    root = tmp_path_factory.mktemp("hf")
    for arch in ("gpt2", "llama", *NEWER):
        write_checkpoint(arch, root / arch)
    return root


def test_train_modern_then_sample_and_look(tmp_path):
    (tmp_path / "romeo.txt").write_text(TEXT)
    out = tmp_path / "run"
    r = run("train", "--data", tmp_path / "romeo.txt", "--out", out, "--arch", "modern", "--num-kv-heads", 1, *TINY,
            "--max-iters", 6)
    assert r.exit_code == 0, r.output
    r = run("sample", "--checkpoint", out, "ROMEO", "--max-new-tokens", 20, "--temperature", 0)
    assert r.exit_code == 0 and r.output.startswith("ROMEO") and len(r.output) > 20, r.output
    r = run("explain", "ROMEO", "--model", out, "--query", 3, "--json")
    d = json.loads(r.output)
    assert d["check"]["max_abs_diff_weights"] < 1e-5 and d["check"]["max_abs_diff_context"] < 1e-5
    r = run("train", "--data", tmp_path / "romeo.txt", "--out", tmp_path / "bad", "--arch", "modern",
            "--num-kv-heads", 3, *TINY)
    assert r.exit_code == 1 and "num_heads must be divisible by num_kv_heads" in r.output


@pytest.mark.parametrize("arch", ["gpt2", "llama", *NEWER])
def test_sample_and_views_from_a_hugging_face_directory(hf_dirs, tmp_path, arch):
    d = hf_dirs / arch
    r = run("sample", "--model", d, "To be, or not", "--max-new-tokens", 10, "--temperature", 0)
    assert r.exit_code == 0 and r.output.startswith("To be, or not") and len(r.output) > len("To be, or not\n")
    r = run("explain", "To be, or not to be", "--model", d, "--query", "be", "--head", 3, "--json")
    assert r.exit_code == 0, r.output
    d_json = json.loads(r.output)
    assert d_json["check"]["max_abs_diff_weights"] < 1e-5 and d_json["model"].endswith(f"({arch})")
    png = tmp_path / "heads.png"
    assert run("heatmap", "To be, or not to be", "--model", d, "--all-heads", "-o", png).exit_code == 0
    assert png.stat().st_size > 1000
    page = tmp_path / "view.html"
    r = run("view", "To be, or not to be", "--model", d, "-o", page)
    assert r.exit_code == 0 and page.stat().st_size > 1000, r.output


def test_sample_needs_one_model(hf_dirs, tmp_path):
    r = run("sample", "hello")
    assert r.exit_code == 2 and "exactly one of them" in r.output
    r = run("sample", "--model", hf_dirs / "llama", "--checkpoint", hf_dirs / "llama", "hello")
    assert r.exit_code == 2 and "exactly one of them" in r.output
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["BertForMaskedLM"]}))
    r = run("sample", "--model", tmp_path, "hello")
    assert r.exit_code == 1 and "unsupported architecture ['BertForMaskedLM']" in r.output
    assert "Traceback" not in r.output


def test_a_config_field_attnlab_does_not_implement_is_one_line(hf_dirs, tmp_path):
    import shutil

    d = tmp_path / "quantised"
    shutil.copytree(hf_dirs / "qwen3", d)
    raw = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**raw, "quantization_config": {"bits": 4}}))
    r = run("sample", "--model", d, "hello")
    assert r.exit_code == 1 and "Traceback" not in r.output, r.output
    assert "cannot honour quantization_config={'bits': 4}" in r.output and len(r.output.strip().splitlines()) == 1
    r = run("heatmap", "hello there", "--model", d, "-o", tmp_path / "h.png")
    assert r.exit_code == 2 and "cannot honour quantization_config" in r.output and not (tmp_path / "h.png").exists()


def test_several_prompts_are_decoded_as_a_batch_each_as_alone(hf_dirs):
    prompts = ["To be, or not", "Whether", "我爱学习"]
    r = run("sample", "--model", hf_dirs / "llama", *prompts, "--max-new-tokens", 70, "--temperature", 0)
    assert r.exit_code == 0, r.output
    alone = [run("sample", "--model", hf_dirs / "llama", p, "--max-new-tokens", 70, "--temperature", 0).output
             for p in prompts]
    assert r.output == "".join(alone)  # each past the Llama's 64 positions (RoPE: no note, nothing cropped)


def test_a_learned_position_table_says_it_crops(hf_dirs):
    """GPT-2's 64 positions, 80 new tokens: one note on stderr, then the text."""
    r = CliRunner().invoke(main, ["sample", "--model", str(hf_dirs / "gpt2"), "To be", "--max-new-tokens", "80",
                                  "--temperature", "0"], catch_exceptions=False)
    assert r.exit_code == 0 and r.stdout.startswith("To be")
    assert r.stderr.strip().splitlines() == [
        "note: GPT: 2 prompt + 80 new tokens pass its learned position table of 64 positions; from there on each "
        "token is computed from the last 64 tokens alone (crop and recompute)"]


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_sample_a_loaded_checkpoint_in_int8_weights_and_with_the_int8_cache(hf_dirs, arch):
    """``--quantize int8`` and ``--int8-cache`` decode a loaded checkpoint from the command line (quality: the
    model tests)."""
    args = ["sample", "--model", hf_dirs / arch, "To be", "--max-new-tokens", 12, "--temperature", 0]
    fp32 = run(*args)
    for extra in (["--quantize", "int8"], ["--int8-cache"]):
        r = run(*args, *extra)
        assert r.exit_code == 0 and r.output.startswith("To be"), r.output
        assert len(r.output) > len("To be"), r.output
    assert fp32.exit_code == 0


def test_sample_with_a_sink_cache_is_generate_with_it(hf_dirs):
    """``--sink-tokens 4 --sliding-window 8``, 40 tokens: the text of ``generate`` with the same cache, which
    differs from the full cache's once the window slides."""
    import torch

    from attnlab.generation import GenerationConfig, generate
    from attnlab.models import SinkKVCache
    from attnlab.pretrained import load_causal_lm

    args = ["sample", "--model", hf_dirs / "qwen3", "To be, or not", "--max-new-tokens", 40, "--temperature", 0]
    r = run(*args, "--sink-tokens", 4, "--sliding-window", 8)
    assert r.exit_code == 0, r.output
    model, tokenizer = load_causal_lm(hf_dirs / "qwen3")
    ids = torch.tensor([tokenizer.encode("To be, or not")])
    sink = SinkKVCache.for_model(model, 1, sink_tokens=4, sliding_window=8)
    want = generate(model, ids, 40, GenerationConfig(temperature=0), cache=sink)[0].tolist()
    assert r.output == tokenizer.decode(want) + "\n" and r.output != run(*args).output


NOT_BUILT = "torch's kernels (attnlab's are not in use: ATTNLAB_CPU_KERNELS=0 is set)"


@pytest.mark.parametrize(("quantize", "ready", "note"), [
    ([], False, f"note: fp32 products run on {NOT_BUILT}"),
    (["--quantize", "int8"], False, f"note: int8 products run on {NOT_BUILT}"),
    ([], True, None),
    (["--quantize", "int8"], True, None)])
def test_sample_on_the_cpu_says_when_attnlabs_kernels_are_not_in_use(hf_dirs, monkeypatch, quantize, ready, note):
    """Nothing is built while a sample runs (``attnlab kernels`` builds them ahead of time): where the kernels are
    not loaded, one note says what the products run on instead, and why; where they are, nothing is said."""
    from attnlab.fast import kernels

    monkeypatch.setattr(kernels, "load", lambda: ready)
    monkeypatch.setitem(kernels._state, "ready", ready)
    monkeypatch.setitem(kernels._state, "why", "ATTNLAB_CPU_KERNELS=0 is set")
    args = ["sample", "--model", str(hf_dirs / "gpt2"), "To be", "--max-new-tokens", "4", "--temperature", "0"]
    r = CliRunner().invoke(main, [*args, *quantize], catch_exceptions=False)
    assert r.exit_code == 0 and r.stdout.startswith("To be")
    assert [line for line in r.stderr.splitlines() if "products run on" in line] == ([note] if note else [])
    plain = CliRunner().invoke(main, [*args, *quantize, "--plain"], catch_exceptions=False)  # the book's modules
    assert plain.exit_code == 0 and plain.stdout == r.stdout and "products run on" not in plain.stderr
