"""The "auto" rule, row by row: a pure function of the call's facts, so every device's row is tested here."""

import typing

import pytest
import torch

from attnlab.functional import BACKENDS, AttentionCall, Backend, choose_backend, scaled_dot_product_attention

LONG = 2048  # 2048² scores per head: past the chunked-for-dropout threshold


@pytest.mark.parametrize(("call", "expected"), [
    (AttentionCall("cpu", 8, 8, return_weights=True), "math"),
    (AttentionCall("cuda", LONG, LONG, dropout=True, return_weights=True), "math"),
    (AttentionCall("cpu", 1, 4096), "math"),            # one query (decoding): two small matmuls
    (AttentionCall("cpu", LONG, LONG, dropout=True), "chunked"),
    (AttentionCall("cpu", 512, 512, dropout=True), "sdpa"),  # short: torch's kernel is fine
    (AttentionCall("cpu", LONG, LONG), "sdpa"),
    (AttentionCall("cuda", LONG, LONG, dropout=True), "sdpa"),  # torch's CUDA kernels do dropout themselves
    (AttentionCall("cuda", 1, 4096), "sdpa"),
])
def test_the_auto_rule(call, expected):
    assert choose_backend(call) == expected


def test_the_backend_list_has_one_home():
    assert BACKENDS == typing.get_args(Backend) == ("auto", "math", "sdpa", "chunked")


def test_auto_runs_what_the_rule_chose(monkeypatch):
    import attnlab.functional.sdpa as sdpa

    seen = []
    monkeypatch.setattr(sdpa, "chunked_attention", lambda *a: seen.append("chunked") or a[0])
    q = torch.zeros(1, 1, LONG, 4)
    scaled_dot_product_attention(q, q, q, dropout_p=0.1)
    assert seen == ["chunked"]
