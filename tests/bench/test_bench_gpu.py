"""benchmarks/bench_gpu.py without a GPU: its report, its reading of the results, and the GPT-2 weight copy.

The timings themselves need an NVIDIA GPU (docs/gpu.md); everything around them is checked here.
"""

import pytest
import torch

from benchmark_scripts import benchmark_script


@pytest.fixture(scope="module")
def bench():
    with benchmark_script("bench_gpu") as module:
        yield module


def test_a_dry_run_writes_every_table(bench, tmp_path, capsys):
    out = bench.main(["--dry-run", "--out", str(tmp_path / "gpu.md")])
    text = out.read_text(encoding="utf-8")
    assert text.startswith("# attnlab on a GPU (DRY RUN: made-up figures)")
    for heading in ("## Attention, bf16", "## Training GPT-2 small", "## Greedy decoding", "## What `auto` may take"):
        assert heading in text
    attention_rows = [line for line in text.splitlines() if line.startswith("| (") and "B,H,T,D" not in line]
    assert len(attention_rows) == 2 * 8  # 3 shapes and the padded one, causal and not, fwd and fwd+bwd
    assert "| (1, 16, 16384, 128) | causal | fwd+bwd |" in text and "| (4, 16, 4096, 64) | padding + causal |" in text
    assert text.count("| fp32 |") == 2 and text.count("| bf16 |") == 2
    assert "| 1 | 150 |" in text and "| 8 | 1,200 |" in text and "FLASH_FASTER = " in text
    # beside attnlab's fast path, the book's: a column of its own in training and decoding, against HF too
    assert "| attnlab / HF | plain tok/s | plain / HF |" in text and "| plain | plain compile=True |" in text
    assert "| 1 | 150 | 1.10× | 4.00× | 256 of 256 | 17 of 256 | 0.90× | 3.50× |" in text
    assert "wrote" in capsys.readouterr().out


def test_parts_and_bad_parts(bench, tmp_path, capsys):
    text = bench.main(["--dry-run", "--quick", "--parts", "decoding", "--out", str(tmp_path / "d.md")]).read_text()
    assert "## Greedy decoding" in text and "## Attention" not in text and "## Training" not in text
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--dry-run", "--parts", "attention,speed"])
    assert exit_info.value.code == 2
    assert "--parts: unknown part(s) ['speed']; choose from attention, training, decoding" in capsys.readouterr().err


def test_a_real_run_without_a_gpu_says_so(bench, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit, match=r"bench_gpu\.py needs an NVIDIA GPU"):
        bench.GpuRun()


def test_flash_rows_are_where_flash_won_every_longer_case(bench):
    def case(t, kind):
        return bench.AttentionCase((1, 1, t, 64), causal=kind == "causal", padding=kind == "bool")

    def result(flash, torch_ms=1.0, sdpa=1.0):
        return {"torch": torch_ms, "sdpa": sdpa, "flash": flash}

    win, lose = result(0.9), result(1.1)
    runs = [
        (case(1024, "bool"), lose, win), (case(4096, "bool"), win, win), (case(16384, "bool"), win, win),
        (case(1024, "causal"), win, win), (case(4096, "causal"), win, lose),  # loses its longest: no row
        (case(4096, "none"), win, {"torch": 1.0, "sdpa": 1.0, "flash": "OOM"}),  # a failure is no win
    ]
    assert bench.flash_rows(runs) == {("bool", "bfloat16"): 4096}
    assert bench.flash_rows([(case(1024, "bool"), result(0.9, sdpa=0.8), win)]) == {}  # must beat our sdpa too


def test_gpt2_weights_copy_into_our_gpt_exactly(bench):
    from transformers import GPT2Config, GPT2LMHeadModel

    from attnlab.models import GPT, GPTConfig

    torch.manual_seed(0)
    hf = GPT2LMHeadModel._from_config(GPT2Config(vocab_size=97, n_positions=32, n_embd=64, n_layer=2, n_head=4,
                                                 bos_token_id=0, eos_token_id=0), attn_implementation="sdpa").eval()
    ours = GPT(GPTConfig(vocab_size=97, context_length=32, d_model=64, num_layers=2, num_heads=4,
                         qkv_bias=True)).eval()
    bench.copy_gpt2_weights(hf, ours)
    idx = torch.randint(0, 97, (2, 20))
    with torch.no_grad():
        torch.testing.assert_close(ours(idx).logits, hf(idx).logits, atol=1e-5, rtol=0)


def test_from_log_rebuilds_the_report_a_run_would_have_written(bench, tmp_path, capsys):
    """A run stopped at a time limit prints its figures and writes no report: --from-log writes it from them."""
    written = bench.main(["--dry-run", "--out", str(tmp_path / "run.md")]).read_text(encoding="utf-8")
    log = tmp_path / "run.log"
    log.write_text(capsys.readouterr().out, encoding="utf-8")
    assert log.read_text(encoding="utf-8").startswith("facts: DRY RUN")
    rebuilt = bench.main(["--from-log", str(log), "--out", str(tmp_path / "gpu.md")]).read_text(encoding="utf-8")
    body = [line for line in written.splitlines() if line.startswith(("|", "FLASH_FASTER"))]
    assert body and body == [line for line in rebuilt.splitlines() if line.startswith(("|", "FLASH_FASTER"))]
    assert "assembled with --from-log from the lines that 1 run(s) printed" in rebuilt
    assert "Written by `benchmarks/bench_gpu.py` --from-log" in rebuilt


def test_from_log_without_figures_is_refused(bench, tmp_path, capsys):
    empty = tmp_path / "empty.log"
    empty.write_text("nothing measured\n", encoding="utf-8")
    with pytest.raises(SystemExit):
        bench.main(["--from-log", str(empty), "--out", str(tmp_path / "gpu.md")])
    assert "--from-log: no figure in" in capsys.readouterr().err and not (tmp_path / "gpu.md").exists()
    with pytest.raises(SystemExit):
        bench.main(["--from-log", str(tmp_path / "gone.log"), "--out", str(tmp_path / "gpu.md")])
    assert f"--from-log: no such file: {tmp_path / 'gone.log'}" in capsys.readouterr().err
