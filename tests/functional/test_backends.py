"""The "auto" rule, row by row: a pure function of the kind of a call, so every device's row is tested here; and the
one table of attention functions, each called with the same keyword arguments."""

import ast
import inspect
import typing
from pathlib import Path

import pytest
import torch

import attnlab.functional.backends as backends
from attnlab.functional import BACKENDS, KERNELS, Backend, CallKind, choose_backend, scaled_dot_product_attention
from attnlab.functional.backends import auto_backend

LONG = 11  # ⌊log₂ 2048⌋: 2048² scores per head, past the long-call threshold of 2²⁰
SHORT = 9  # 512


def cuda(mask="none", dtype="bfloat16", t=LONG, **facts):
    return CallKind("cuda", dtype, t, t, mask, **facts)


@pytest.mark.parametrize(("kind", "expected"), [
    (CallKind("cpu", queries=3, keys=3, weights=True), "math"),
    (CallKind("cuda", queries=LONG, keys=LONG, dropout=True, weights=True), "math"),
    (cuda("bool", flash=True, weights=True), "math"),  # weights win over everything
    (CallKind("cpu", queries=0, keys=12), "sdpa"),      # one query: torch's kernel (the fast layer takes decoding)
    (CallKind("cpu", queries=LONG, keys=LONG, dropout=True), "chunked"),  # torch's would hold O(T²) for dropout
    (CallKind("cpu", queries=SHORT, keys=SHORT, dropout=True), "sdpa"),   # short: torch's kernel is fine
    (CallKind("cpu", queries=LONG, keys=LONG), "sdpa"),
    (CallKind("cpu", queries=LONG, keys=LONG, mask="bool", flash=True), "sdpa"),  # flash is never chosen on a CPU
    (CallKind("cpu", queries=SHORT, keys=SHORT, softcap=True), "math"),   # a cap: a kernel that computes scores
    (CallKind("cpu", queries=LONG, keys=LONG, softcap=True), "chunked"),  # ... in O(T) memory when long
    (CallKind("cpu", queries=LONG, keys=LONG, sinks=True), "chunked"),    # sinks over a long call: no O(T²) mask
    (CallKind("cpu", queries=SHORT, keys=SHORT, sinks=True), "sdpa"),     # short: torch's, the sinks a mask column
    (CallKind("cuda", queries=LONG, keys=LONG, dropout=True), "sdpa"),  # torch's CUDA kernels do dropout themselves
    (CallKind("cuda", queries=14, keys=14, dropout=True), "sdpa"),  # never chunked on a GPU
    (CallKind("cuda", queries=0, keys=12), "sdpa"),
    (cuda("bool", flash=True), "sdpa"),  # 2048 keys: fewer than FLASH_FASTER's measured 4096, torch's kernel
    (cuda("bool", flash=True, t=12), "flash"),  # measured faster on an H100 (benchmarks/results/gpu.md)
    (cuda("bool", "float16", flash=True, t=12), "sdpa"),  # float16: not measured
    (cuda(flash=True, softcap=True), "flash"),  # a cap on CUDA: the kernel that computes the scores fused
    (cuda(flash=False, softcap=True), "math"),  # ... where it cannot run, the math one
    (cuda(flash=True, softcap=True, dropout=True), "math"),  # flash has no dropout
])
def test_the_auto_rule(kind, expected):
    assert choose_backend(kind) == expected


def test_the_rule_has_at_most_five_conditions():
    """docs/attention.md states it in one paragraph: the function's body is five ifs and a default."""
    body = ast.parse(inspect.getsource(choose_backend)).body[0].body
    conditions = [node for node in body if isinstance(node, ast.If)]
    assert len(conditions) <= 5 and isinstance(body[-1], ast.Return)


def test_flash_only_where_measured_faster(monkeypatch):
    # a table as bench_gpu.py would fill it: flash wins on padding masks in bf16 from 4096 keys on
    monkeypatch.setattr(backends, "FLASH_FASTER", {("bool", "bfloat16"): 4096})
    assert choose_backend(cuda("bool", flash=True, t=12)) == "flash"
    assert choose_backend(cuda("bool", flash=True, t=13)) == "flash"
    assert choose_backend(cuda("bool", flash=True, t=11)) == "sdpa"       # shorter than measured
    decoding = CallKind("cuda", "bfloat16", 0, 13, "bool", flash=True)
    assert choose_backend(decoding) == "sdpa"  # one query over many keys: not what was measured
    assert choose_backend(cuda("float", flash=True, t=12)) == "sdpa"     # another mask kind: not measured
    assert choose_backend(cuda("none", flash=True, t=12)) == "sdpa"
    assert choose_backend(cuda("bool", flash=False, t=12)) == "sdpa"      # flash cannot run (triton, head dim)
    assert choose_backend(cuda("bool", flash=True, t=12, dropout=True)) == "sdpa"  # flash has no dropout


def test_the_backend_list_has_one_home():
    assert BACKENDS == typing.get_args(Backend) == ("auto", "math", "sdpa", "chunked", "flash")
    assert BACKENDS[1:] == tuple(KERNELS)


def test_the_flash_table_is_the_one_the_gpu_run_wrote():
    # only rows measured on a GPU: benchmarks/bench_gpu.py writes the table its run supports at the end of gpu.md
    report = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "gpu.md"
    line = next(line for line in report.read_text(encoding="utf-8").splitlines() if line.startswith("FLASH_FASTER = "))
    assert ast.literal_eval(line.removeprefix("FLASH_FASTER = ")) == backends.FLASH_FASTER


def test_every_kernel_is_called_with_the_same_keywords():
    expected = ["attn_mask", "dropout_p", "is_causal", "scale", "groups", "return_weights", "softcap", "sinks"]
    for name, kernel in KERNELS.items():
        parameters = inspect.signature(inspect.unwrap(kernel.run)).parameters
        keywords = [p.name for p in parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY]
        assert list(parameters)[:3] == ["query", "key", "value"] and keywords == expected, name


def test_the_kind_is_decided_once_per_shape_class():
    """A decoding loop's keys grow by one a step: the kind's lengths are powers of two, so the rule is asked once per
    doubling (the answers are kept), and the tensors' values are never read."""
    auto_backend.cache_clear()
    q = torch.zeros(1, 2, 1, 16)
    for t in range(64, 128):
        k = torch.zeros(1, 2, t, 16)
        scaled_dot_product_attention(q, k, k)
    assert auto_backend.cache_info().misses == 1 and auto_backend.cache_info().hits == 63


def test_auto_runs_what_the_rule_chose(monkeypatch):
    seen = []
    monkeypatch.setattr(backends, "chunked_attention", lambda *a, **kw: seen.append("chunked") or a[0])
    auto_backend.cache_clear()
    q = torch.zeros(1, 1, 2048, 4)
    scaled_dot_product_attention(q, q, q, dropout_p=0.1)
    assert seen == ["chunked"]


def test_the_kind_names_the_mask_the_dtype_and_the_shape_class(monkeypatch):
    asked = []
    rule = backends.choose_backend
    monkeypatch.setattr(backends, "choose_backend", lambda kind: asked.append(kind) or rule(kind))
    auto_backend.cache_clear()
    q, k = torch.zeros(2, 3, 4, 8, dtype=torch.bfloat16), torch.zeros(2, 3, 6, 8, dtype=torch.bfloat16)
    for mask, is_causal in ((None, False), (None, True), (torch.ones(4, 6, dtype=torch.bool), True),
                            (torch.zeros(1, 1, 1, 6, dtype=torch.bfloat16), False)):
        scaled_dot_product_attention(q, k, k, attn_mask=mask, is_causal=is_causal, dropout_p=0.1)
    assert [kind.mask for kind in asked] == ["none", "causal", "bool", "float"]
    assert {(kind.device, kind.dtype, kind.queries, kind.keys, kind.dropout) for kind in asked} == \
        {("cpu", "bfloat16", 2, 2, True)}  # ⌊log₂ 4⌋, ⌊log₂ 6⌋
