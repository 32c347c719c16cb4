"""The "auto" rule, row by row: a pure function of the call's facts, so every device's row is tested here."""

import ast
import typing
from pathlib import Path

import pytest
import torch

import attnlab.functional.backends as backends
from attnlab.functional import BACKENDS, AttentionCall, Backend, choose_backend, scaled_dot_product_attention
from attnlab.functional.sdpa import call_facts

LONG = 2048  # 2048² scores per head: past the chunked-for-dropout threshold


def cuda(mask="none", dtype="bfloat16", t=LONG, **facts):
    return AttentionCall("cuda", t, t, dtype=dtype, mask=mask, **facts)


@pytest.mark.parametrize(("call", "expected"), [
    (AttentionCall("cpu", 8, 8, return_weights=True), "math"),
    (AttentionCall("cuda", LONG, LONG, dropout=True, return_weights=True), "math"),
    (cuda("bool", flash=True, return_weights=True), "math"),  # weights win over everything
    (AttentionCall("cpu", 1, 4096), "math"),            # one query (decoding): two small matmuls
    (AttentionCall("cpu", 4, 20, mask="bool"), "math"),  # a search's 4 beams over a 20-token source
    (AttentionCall("cpu", 4, 20, mask="bool", strided=True), "sdpa"),  # keys projected afresh: the matmuls'd copy
    (AttentionCall("cpu", 1, 20, strided=True), "math"),  # one query: the math path, whatever the layout
    (AttentionCall("cpu", 8, 64), "math"),              # 512 scores: still two small matmuls
    (AttentionCall("cpu", 8, 65), "sdpa"),              # past 512 scores per head: the fused kernel
    (AttentionCall("cpu", 9, 9), "sdpa"),               # more than a few queries: the fused kernel
    (AttentionCall("cpu", LONG, LONG, dropout=True), "chunked"),
    (AttentionCall("cpu", 512, 512, dropout=True), "sdpa"),  # short: torch's kernel is fine
    (AttentionCall("cpu", LONG, LONG), "sdpa"),
    (AttentionCall("cpu", LONG, LONG, mask="bool", flash=True), "sdpa"),  # flash is never chosen on the CPU
    (AttentionCall("cuda", LONG, LONG, dropout=True), "sdpa"),  # torch's CUDA kernels do dropout themselves
    (AttentionCall("cuda", 16384, 16384, dropout=True, dtype="bfloat16"), "sdpa"),  # never chunked on a GPU
    (AttentionCall("cuda", 1, 4096), "sdpa"),
    (cuda("bool", flash=True), "sdpa"),  # 2048 keys: fewer than FLASH_FASTER's measured 4096, torch's kernel
    (cuda("bool", flash=True, t=4096), "flash"),  # measured faster on an H100 (benchmarks/results/gpu.md)
    (cuda("bool", "float16", flash=True, t=4096), "sdpa"),  # float16: not measured
])
def test_the_auto_rule(call, expected):
    assert choose_backend(call) == expected


def test_flash_only_where_measured_faster(monkeypatch):
    # a table as bench_gpu.py would fill it: flash wins on padding masks in bf16 from 4096 keys on
    monkeypatch.setattr(backends, "FLASH_FASTER", {("bool", "bfloat16"): 4096})
    assert choose_backend(cuda("bool", flash=True, t=4096)) == "flash"
    assert choose_backend(cuda("bool", flash=True, t=8192)) == "flash"
    assert choose_backend(cuda("bool", flash=True, t=2048)) == "sdpa"       # shorter than measured
    decoding = AttentionCall("cuda", 1, 8192, dtype="bfloat16", mask="bool", flash=True)
    assert choose_backend(decoding) == "sdpa"  # one query over many keys: not what was measured
    assert choose_backend(cuda("bool", "float16", flash=True, t=4096)) == "sdpa"  # another dtype: not measured
    assert choose_backend(cuda("float", flash=True, t=4096)) == "sdpa"     # another mask kind: not measured
    assert choose_backend(cuda("none", flash=True, t=4096)) == "sdpa"
    assert choose_backend(cuda("bool", flash=False, t=4096)) == "sdpa"      # flash cannot run (triton, head dim)
    assert choose_backend(cuda("bool", flash=True, t=4096, dropout=True)) == "sdpa"  # flash has no dropout
    assert choose_backend(cuda("bool", flash=True, t=4096, return_weights=True)) == "math"
    on_cpu = AttentionCall("cpu", 4096, 4096, dtype="bfloat16", mask="bool", flash=True)
    assert choose_backend(on_cpu) == "sdpa"


def test_the_backend_list_has_one_home():
    assert BACKENDS == typing.get_args(Backend) == ("auto", "math", "sdpa", "chunked", "flash")


def test_the_flash_table_is_the_one_the_gpu_run_wrote():
    # only rows measured on a GPU: benchmarks/bench_gpu.py writes the table its run supports at the end of gpu.md
    report = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "gpu.md"
    line = next(line for line in report.read_text(encoding="utf-8").splitlines() if line.startswith("FLASH_FASTER = "))
    assert ast.literal_eval(line.removeprefix("FLASH_FASTER = ")) == backends.FLASH_FASTER


@pytest.mark.parametrize(("mask", "is_causal", "kind"), [
    (None, False, "none"), (None, True, "causal"), (torch.ones(4, 6, dtype=torch.bool), False, "bool"),
    (torch.ones(4, 6, dtype=torch.bool), True, "bool"), (torch.zeros(1, 1, 1, 6), True, "float"),
])
def test_the_facts_read_from_a_call(mask, is_causal, kind):
    q, k = torch.zeros(2, 3, 4, 8, dtype=torch.bfloat16), torch.zeros(2, 3, 6, 8, dtype=torch.bfloat16)
    call = call_facts(q, k, mask, 0.1, is_causal, False)
    assert call == AttentionCall("cpu", 4, 6, dropout=True, dtype="bfloat16", mask=kind, flash=False)


def test_keys_strided_by_their_heads_are_told_from_the_ones_a_matmul_takes_as_they_are():
    """A (B, T, D) projection viewed as (B, H, T, D / H) is strided; a contiguous tensor, a cache's filled part and a
    query's single head are not. Only a few queries (where the rule reads it) look at the layout."""
    b, t, h, d = 2, 6, 3, 8
    heads = torch.zeros(b, t, h * d).view(b, t, h, d).transpose(1, 2)  # (B, H, T, d), heads of one projection
    filled = torch.zeros(b, h, 16, d)[:, :, :t]  # a cache's first t of 16 slots
    assert not backends.folds(heads) and backends.folds(heads.contiguous()) and backends.folds(filled)
    assert backends.folds(torch.zeros(b, t, h * d).view(b, t, 1, h * d).transpose(1, 2))  # one head: nothing to fold
    q = torch.zeros(b, h, 4, d)
    assert call_facts(q, heads, None, 0.0, False, False).strided
    assert not call_facts(q, heads.contiguous(), None, 0.0, False, False).strided
    assert not call_facts(q[:, :, :1], heads, None, 0.0, False, False).strided  # one query: not looked at


def test_flash_is_asked_about_only_where_the_table_could_pick_it(monkeypatch):
    import attnlab.functional.flash as flash

    asked = []
    monkeypatch.setattr(flash, "flash_can_run", lambda q: asked.append(q.shape) or True)
    q = torch.zeros(1, 2, 8, 16)
    mask = torch.ones(1, 1, 1, 8, dtype=torch.bool)
    # a CUDA call without a GPU: the facts read only device types, so the device is all that must say "cuda"
    monkeypatch.setattr(torch.Tensor, "device", property(lambda t: torch.device("cuda")))
    assert not call_facts(q, q, mask, 0.0, False, False).flash and asked == []  # table empty: not asked
    monkeypatch.setattr(backends, "FLASH_FASTER", {("bool", "float32"): 8})
    assert call_facts(q, q, mask, 0.0, False, False).flash and asked == [q.shape]


def test_auto_runs_what_the_rule_chose(monkeypatch):
    import attnlab.functional.backends as backends

    seen = []
    monkeypatch.setattr(backends, "chunked_attention", lambda *a, **kw: seen.append("chunked") or a[0])
    q = torch.zeros(1, 1, LONG, 4)
    scaled_dot_product_attention(q, q, q, dropout_p=0.1)
    assert seen == ["chunked"]
