"""The bookkeeping of benchmarks/bench_patching.py: its inputs and its timer (the timings themselves are measured,
never asserted)."""

import torch

from benchmark_scripts import benchmark_script


def test_the_corrupted_input_redraws_the_first_half_only():
    with benchmark_script("bench_patching") as bench:
        clean, corrupt = bench.pair(64, 4, 16)
    assert clean.shape == corrupt.shape == (4, 16) and torch.equal(clean[:, 8:], corrupt[:, 8:])
    assert not torch.equal(clean[:, :8], corrupt[:, :8])


def test_the_timer_calls_every_function_once_a_round_in_turn():
    calls = []
    with benchmark_script("bench_patching") as bench:
        seconds = bench.timed({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, rounds=3)
    assert calls == ["a", "b", "b", "a", "a", "b"] and set(seconds) == {"a", "b"}
    assert all(s >= 0 for s in seconds.values())
