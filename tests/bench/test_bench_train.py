"""benchmarks/bench_train.py: the loss curves of two loops are compared window by window, and the table gives every
loop against the plain float32 loop, with its MFU over the peak of its own dtype. (The figures are for a quiet
machine; here the bookkeeping, with results made up.)"""

import pytest

from attnlab.bench.machine import Limit
from benchmark_scripts import benchmark_script


@pytest.fixture(scope="module")
def bench():
    with benchmark_script("bench_train") as module:
        yield module


def test_curve_gap_is_the_largest_gap_of_the_windows_means(bench):
    twin = [4.0, 2.0, 3.0, 1.0, 5.0]
    # windows of 2 over the first 4 steps: means (3, 2) against (3.5, 2.5); the fifth step is left out
    assert bench.curve_gap([4.0, 2.0, 3.0, 1.0, 9.0], [4.5, 2.5, 3.0, 2.0], 2) == pytest.approx(0.5)
    assert bench.curve_gap(twin, twin, 2) == 0.0
    assert bench.curve_gap([1.0, 2.0], [1.5, 2.5, 7.0], 100) == pytest.approx(0.5)  # one window, the shorter run's


def test_table_gives_each_loop_against_the_plain_loop_and_mfu_over_its_dtypes_peak(bench):
    def loop(tokens_per_s, bf16=False, gap=None):
        return {"wall_s": 1.0, "train_s": 1.0, "median_ms": 10.0, "tokens_per_s": tokens_per_s, "bf16": bf16,
                "val_loss": 1.9, "curve_gap": gap, "profiled_ms": 40.0, "products_ms": 20.0}

    a = {"iters": 2000, "params": 811_776, "compile_s": {"attnlab --compile": 4.0}, "flops_per_token": 5e6,
         "matmul": Limit(200.0, 200.0, 200.0, "GFLOP/s", "torch.mm fp32 4096x4096"),
         "matmul_bf16": Limit(400.0, 400.0, 400.0, "GFLOP/s", "torch.mm bf16 4096x4096"),
         "reference": loop(10_000), "reference bf16": loop(8_000, True, 0.01), "attnlab": loop(10_000),
         "attnlab --compile": loop(11_000, gap=0.001), "attnlab bf16": loop(13_000, True, 0.02),
         "attnlab --compile bf16": loop(16_000, True, 0.03), "attnlab --plain": loop(8_000, gap=0.0005)}
    text = "\n".join(bench.section_a(a, quick=False))
    rows = {line.split(" | ")[0][2:]: line.split(" | ") for line in text.splitlines() if line.startswith("| ")}
    assert rows["attnlab.training, compile=True, dtype=bf16"][5:9] == ["1.60×", "20.0 %", "1.900", "0.0300"]
    assert rows["plain PyTorch loop"][5:9] == ["1.00×", "25.0 %", "1.900", "–"]  # 10,000 · 5 MFLOP / 200 GFLOP/s
    assert "with compile=True **1.10×** in float32 and **1.60×** with dtype=bf16" in text
    assert "compile=True with bf16 runs 2.00×" in text
    # the trainer on the book's modules: a row of its own, against the plain loop and against the fast twins
    assert rows["attnlab.training, --plain (the book's modules, not accelerated)"][5:9] == ["0.80×", "20.0 %", "1.900",
                                                                                         "0.0005"]
    assert "(`--plain`) attnlab.training runs 0.80× the plain loop: the fast twins make it 1.25× as fast" in text


def test_part_b_says_so_where_the_budget_ended_before_a_plan(bench):
    peak = Limit(200.0, 200.0, 200.0, "GFLOP/s", "torch.mm fp32 4096x4096")
    b = {"config": {"preset": "baby"}, "params": 811_776, "steps": 5, "stop_reason": "time_budget", "wall_s": 10.0,
         "tokens_per_s": 1_000.0, "flops_per_token": 5e6, "matmul": peak, "train_loss": 4.0, "val_loss": 3.99,
         "budget_min": 10 / 60}
    planned = "\n".join(bench.section_b({**b, "planned_iters": 1_804, "plan_step_ms": 330.0}))
    assert "its last plan 1,804 steps at 330.0 ms a step." in planned
    early = "\n".join(bench.section_b({**b, "planned_iters": None, "plan_step_ms": None}))
    assert "the budget was spent before its first plan." in early and "| 5 | time_budget | 10 |" in early
