"""The HTML viewer's page: self-contained, data escaped, weights quantised within the stated error."""

from __future__ import annotations

import base64
import html
import json
import re
import zlib

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attnlab.inspect import RandomModel, RandomModelConfig, capture
from attnlab.viz.viewer import QUANT_ERROR, AttentionView, build_html, dequantise, quantise, write_html

XSS = "<img src=x onerror=alert(1)>"


def _data(page: str) -> dict:
    block = re.search(r'<script type="application/json" id="attnlab-data">(.*?)</script>', page, re.S).group(1)
    return json.loads(block)


@pytest.fixture(scope="module")
def cap():
    model = RandomModel(RandomModelConfig("multihead"))
    tokens = ["我", XSS, "</script><script>alert(2)</script>", "&amp;", "AI"]
    return capture(model, model.embed(tokens), tokens=tokens)


def test_page_is_self_contained(cap):
    page = build_html(cap, embed_font=False)
    assert "<link" not in page and not re.search(r"<script[^>]+src=", page)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "default-src 'none'" in page  # the page may fetch nothing at all


def test_tokens_cannot_break_out_of_the_data_block(cap):
    page = build_html(cap, embed_font=False)
    assert XSS not in page and "</script><script>alert(2)" not in page
    assert page.count("</script>") == 2  # the data block's and the code's, nothing else
    data = _data(page)
    assert data["tokens"] == cap.tokens  # yet the exact text comes back out of the JSON


@given(st.lists(st.floats(0, 1), min_size=3, max_size=3))
def test_quantisation_error_is_within_bound(row):
    w = torch.tensor([[[row, row[::-1], [0.0, 0.0, 0.0]]]], dtype=torch.float32)  # (H=1, T=3, T=3)
    q, rm = quantise([w[0]])
    back = dequantise(q, rm, (1, 1, 3, 3))
    bound = w.amax(-1, keepdim=True).numpy() * QUANT_ERROR + 1e-7
    assert np.all(np.abs(back - w.numpy()) <= bound)


def test_payload_decodes_to_the_capture(cap):
    data = _data(build_html(cap, embed_font=False))
    q = zlib.decompress(base64.b64decode(data["weights"]))
    back = dequantise(q, base64.b64decode(data["rowmax"]), (cap.num_layers, cap.num_heads, cap.seq_len, cap.seq_len))
    np.testing.assert_allclose(back, torch.stack(cap.attentions).numpy(), atol=QUANT_ERROR + 1e-6)


def test_jupyter_iframe_srcdoc(cap):
    out = AttentionView(cap, embed_font=False)._repr_html_()
    assert out.startswith("<iframe srcdoc=\"") and "<script" not in out.split('srcdoc="')[1].split('"')[0]
    inner = html.unescape(out.split('srcdoc="')[1].split('" style=')[0])
    assert inner == build_html(cap, embed_font=False)


def test_write_html_and_bad_layer(cap, tmp_path):
    out = write_html(cap, tmp_path / "a.html", embed_font=False)
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    with pytest.raises(ValueError, match=r"head must be in 0\.\.1"):
        build_html(cap, head=5)


def _shown_text(page: str) -> str:
    """What the page can show: its HTML's text (the controls), and from its data the title, the tokens and the
    lines its script writes (read here from the page, not from the code that made it)."""
    body = re.sub(r"<(script|style)\b.*?</\1>", "", page.split("<body>", 1)[1], flags=re.S)
    data = _data(page)
    return html.unescape(re.sub(r"<[^>]+>", "", body)) + data["title"] + "".join(data["ui"].values()) + "".join(
        data["tokens"])


@pytest.mark.parametrize(("lang", "words"), [("en", ["Head view", "Export PNG"]), ("zh", ["头视图", "导出 PNG"])])
def test_the_page_speaks_the_readers_language_and_its_font_holds_every_character(cap, lang, words):
    """``<html lang>``, the controls and the script's lines in the reader's language; the @font-face the page embeds
    has a glyph for every character it can show (fontTools reads the subset back), so a machine with no CJK font
    draws the Chinese page as it draws the English one."""
    from attnlab.i18n import set_language
    from attnlab.viz.webfont import covered

    set_language(lang)
    page = build_html(cap)
    assert f'<html lang="{lang}">' in page and all(w in page for w in words)
    css = " ".join(re.findall(r"@font-face \{.*?\}", page))
    text = _shown_text(page)
    assert "我" in text and covered(text, css)
    assert not covered(text + "鬱", css)  # the control: a character the page does not show is not in its font
    assert _data(page)["font_family"] in re.search(r"--fonts: ([^;]*);", page).group(1)


def test_without_the_font_the_page_embeds_none(cap):
    page = build_html(cap, embed_font=False)
    assert re.search(r"@font-face \{", page) is None and _data(page)["font_family"] is None
