import pytest

from attnlab.bench.cases import BenchConfig, Case, Plan
from attnlab.bench.runner import BenchResult, CaseResult
from attnlab.bench.tables import _slope, command_line, limits_line, markdown, rich_table, targets, write_atomic


def _result() -> BenchResult:
    cfg = BenchConfig(seq_lens=(1024, 4096), backends=("math", "sdpa", "numpy-math"), is_causal=(False,),
                      texts_shape=False)
    ms = {("math", 1024): 40, ("math", 4096): 800, ("sdpa", 1024): 10, ("sdpa", 4096): 160,
          ("numpy-math", 1024): 50, ("numpy-math", 4096): 1000}
    mem = {"math": lambda t: 2 * 8 * t * t * 4, "numpy-math": lambda t: 8 * t * t * 4, "sdpa": lambda t: 4096 * t}
    cases = []
    for t in (1024, 4096):
        for b in cfg.backends:
            cases.append(CaseResult(Case("sweep", b, 1, t, 512, 8, False), Plan(repeats=3), "ok",
                                    times=[ms[b, t] / 1e3] * 3, first_call_s=0.1, peak_extra_bytes=mem[b](t)))
    cases.append(CaseResult(Case("sweep", "math", 1, 65536, 512, 8, False), Plan(skip="memory ~257 GiB"),
                            "skipped", "memory ~257 GiB"))
    machine = {"cpu": "Test CPU", "cores": 2, "torch_threads": 2, "memory_gib": 24.0, "python": "3.11",
               "torch": "2.13.0", "numpy": "2.4"}
    return BenchResult(cfg, machine, {"value": 250.0, "median": 245.0, "low": 240.0, "unit": "GFLOP/s", "what": "mm"},
                       {"value": 10.0, "median": 9.5, "low": 9.0, "unit": "GB/s", "what": "copy"}, 12 * 2**30, cases,
                       42.0)


def test_targets_report_the_ratios_and_the_percent():
    lines = targets(_result())
    assert "T=1024: 1.25×, T=4096: 1.25×" in lines[0]
    # sdpa at 4096: flops / 0.16 s
    case = Case("sweep", "sdpa", 1, 4096, 512, 8, False)
    g = case.flops() / 0.16 / 1e9
    assert f"sdpa, {g:.0f} GFLOP/s = {100 * g / 250:.0f}% of 250" in lines[1]
    assert "Peak memory of math grows as T^2.00" in lines[2]


def test_slope():
    assert _slope({1024: 2.0**20, 4096: 2.0**22}) == pytest.approx(1.0)
    assert _slope({1024: 1.0}) is None


def test_markdown_has_the_machine_the_convention_and_every_case():
    text = markdown(_result(), ["time_vs_T.png"])
    assert "Test CPU, 2 cores" in text and "torch 2.13.0, numpy 2.4" in text
    assert "T(T+1)/2" in text and "**250 GFLOP/s**" in text
    assert text.count("\n| 1×") == 7 and "memory ~257 GiB" in text and "![time_vs_T.png](time_vs_T.png)" in text


def test_rich_table_has_a_row_per_case():
    assert rich_table(_result()).row_count == 7


def test_write_atomic(tmp_path):
    write_atomic(tmp_path / "sub" / "a.md", "hello")
    assert (tmp_path / "sub" / "a.md").read_text() == "hello"
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["a.md"]  # no temp file left behind


def test_machine_limits_are_measured():
    from attnlab.bench.machine import matmul_gflops, memory_bandwidth, read_bandwidth

    mm = matmul_gflops(n=256, repeats=3)
    assert mm.value >= mm.median >= mm.low > 0 and mm.unit == "GFLOP/s"
    bw = memory_bandwidth(mib=8, repeats=3)
    assert bw.value >= bw.median >= bw.low > 0
    read = read_bandwidth(mib=8, repeats=3)
    assert read.value >= read.median >= read.low > 0 and read.unit == "GB/s" and "sum" in read.what
    assert matmul_gflops(n=128, repeats=2, dtype="bf16").what == "torch.mm bf16 128x128"


def test_the_limits_are_printed_side_by_side():
    result = _result()
    result.read_bandwidth = {"value": 27.0, "median": 26.0, "low": 25.0, "unit": "GB/s", "what": "Tensor.sum"}
    result.matmul_bf16 = {"value": 40.0, "median": 39.0, "low": 38.0, "unit": "GFLOP/s", "what": "torch.mm bf16"}
    line = limits_line(result)
    assert line == ("Limits: matmul fp32 250 GFLOP/s; bf16 40 GFLOP/s; memory read 27.0 GB/s; copy 10.0 GB/s "
                    "(read + write)")
    md = markdown(result, [])
    assert "Memory read bandwidth (what decoding streams its weights at): **27.0 GB/s**" in md
    assert "Matrix-multiply limit, bf16: **40.0 GFLOP/s**" in md


def test_command_line_reproduces_the_run():
    assert command_line(BenchConfig.full()) == "attnlab bench --out DIR"
    assert command_line(BenchConfig.quick()) == "attnlab bench --quick --out DIR"
    cfg = BenchConfig.quick(seq_lens=(16,), d_model=32, num_heads=2, texts_shape=False, is_causal=(True,))
    assert command_line(cfg) == ("attnlab bench --quick --seq-lens 16 --causal --d-model 32 --heads 2 "
                                 "--no-texts-shape --out DIR")
