import pytest

from attnlab.bench.cases import BACKENDS, BenchConfig, Case, Planner, estimate_peak_bytes


def test_backends():
    assert BACKENDS == ("math", "sdpa", "chunked", "flash", "auto", "numpy-math", "numpy-chunked")


def test_a_backend_that_does_not_compute_on_a_cpu_is_left_out_and_skipped(monkeypatch):
    from attnlab.bench import cases

    assert "flash" not in BenchConfig().backends and "sdpa" in BenchConfig().backends
    plan = Planner(BenchConfig(), 2**40).plan(Case("sweep", "flash", 1, 256, 512, 8, False))
    assert plan.skip == ("flash runs on a GPU (on a CPU only under Triton's interpreter): benchmarks/bench_gpu.py "
                         "times it")
    monkeypatch.setattr(cases, "unavailable", lambda b: None)  # a backend that computes on a CPU is measured
    assert "flash" in BenchConfig().backends


def test_cases_texts_shape_first_then_sweep_by_t():
    cases = BenchConfig(seq_lens=(1024, 256), backends=("sdpa", "numpy-math")).cases()
    assert [(c.group, c.seq_len) for c in cases[:4]] == [("texts", 256)] * 4
    assert (cases[0].batch, cases[0].d_model, cases[0].num_heads) == (8, 512, 8)
    assert [c.seq_len for c in cases[4:]] == [256] * 4 + [1024] * 4
    assert {c.is_causal for c in cases} == {False, True}


def test_run_order_puts_the_math_paths_last():
    cfg = BenchConfig(seq_lens=(256, 1024), is_causal=(False,))
    order = cfg.run_order()
    assert sorted(order, key=cfg.cases().index) == cfg.cases()  # the same cases
    sweep = [c for c in order if c.group == "sweep"]
    assert [c.backend for c in sweep[-4:]] == ["math", "numpy-math"] * 2
    assert [c.seq_len for c in sweep[:4]] == [256] * 4  # by T within each part


def test_memory_estimates_follow_the_algorithms():
    t = 4096
    math_, np_math, sdpa = (estimate_peak_bytes(Case("sweep", b, 1, t, 512, 8, False))
                            for b in ("math", "numpy-math", "sdpa"))
    scores = 8 * t * t * 4
    assert math_ - sdpa == pytest.approx(2 * scores, rel=0.01)  # torch: scores and softmax output
    assert np_math - sdpa == pytest.approx(scores, rel=0.01)  # NumPy, in place: one score matrix
    longer = estimate_peak_bytes(Case("sweep", "sdpa", 1, 2 * t, 512, 8, False))
    assert longer == pytest.approx(2 * sdpa, rel=0.01)  # O(T)


def test_planner_skips_what_would_not_fit():
    cfg = BenchConfig()
    plan = Planner(cfg, memory_limit=12 * 2**30).plan(Case("sweep", "math", 1, 65536, 512, 8, False))
    assert plan.skip is not None and plan.skip.startswith("memory ~257.0 GiB") and "12.0 GiB limit" in plan.skip


def test_planner_skips_what_would_take_too_long():
    planner = Planner(BenchConfig(max_case_seconds=10), memory_limit=2**40)
    case = Case("sweep", "sdpa", 1, 4096, 512, 8, False)
    planner.learn(case, median_seconds=1.0)
    longer = Case("sweep", "sdpa", 1, 16384, 512, 8, False)
    plan = planner.plan(longer)
    assert plan.est_seconds == pytest.approx(longer.full_flops() / case.full_flops(), rel=1e-9)  # learnt rate
    assert plan.skip == f"time ~{plan.est_total:.0f} s > 10 s budget"


def test_planner_skips_what_would_overrun_the_run():
    planner = Planner(BenchConfig(), memory_limit=2**40)
    case = Case("sweep", "sdpa", 1, 1024, 512, 8, False)
    planner.learn(case, 0.5)  # first call + warm-up + 3 repeats: ~2.5 s
    assert planner.plan(case, seconds_left=10.0).skip is None
    assert planner.plan(case, seconds_left=2.0).skip == "time ~2.5 s > the 2.0 s left of the run's budget"


def test_planner_repeats_and_single_call():
    planner = Planner(BenchConfig(target_seconds=2.0, min_repeats=3, max_repeats=25, long_call_seconds=8.0,
                                  max_case_seconds=100), memory_limit=2**40)
    case = Case("sweep", "sdpa", 1, 1024, 512, 8, False)
    planner.learn(case, 0.1)
    assert planner.plan(case).repeats == 20 and not planner.plan(case).single_call
    planner.learn(case, 1.5)
    assert planner.plan(case).repeats == 3  # at least min_repeats
    planner.learn(case, 9.0)
    plan = planner.plan(case)
    assert plan.single_call and plan.repeats == 1 and plan.warmup == 0 and plan.skip is None
    # an O(T²) backend's first call pays for faulting in the scores: it is never the one timed
    math_case = Case("sweep", "numpy-math", 1, 1024, 512, 8, False)
    planner.learn(math_case, 9.0)
    plan = planner.plan(math_case)
    assert not plan.single_call and plan.repeats == 1 and plan.warmup == 0


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"seq_lens": (256, 0)}, r"seq_lens must be positive integers, got \(256, 0\)"),
    ({"seq_lens": ()}, "seq_lens must be positive integers"),
    ({"backends": ("math", "fast")}, r"unknown backend\(s\) \['fast'\]; valid: math, sdpa, chunked, flash, auto, num"),
    ({"is_causal": ()}, "is_causal must hold at least one"),
    ({"num_heads": 3}, "num_heads=3 must divide d_model=512"),
    ({"min_repeats": 5, "max_repeats": 2}, "must not exceed"),
    ({"max_case_seconds": 0}, "max_case_seconds must be > 0"),
])
def test_config_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        BenchConfig(**kwargs)


def test_the_measured_backends_are_the_libraries_own():
    from attnlab import numpy as anp
    from attnlab.bench.cases import NUMPY_BACKENDS, TORCH_BACKENDS
    from attnlab.functional import BACKENDS

    assert set(TORCH_BACKENDS) == set(BACKENDS)
    assert set(NUMPY_BACKENDS) == {f"numpy-{b}" for b in anp.BACKENDS if b != "auto"}
