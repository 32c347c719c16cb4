"""The font embedded in pages: a WOFF2 subset of the packaged Noto Sans CJK holding exactly what the page shows."""

from __future__ import annotations

import base64
import io

from fontTools.ttLib import TTFont

from attnlab.viz.webfont import FAMILY, covered, font_face_css, font_stack


def _font(css: str) -> TTFont:
    return TTFont(io.BytesIO(base64.b64decode(css.split("base64,", 1)[1].split(")", 1)[0])))


def test_the_rule_declares_the_family_as_inline_woff2():
    css = font_face_css("注意力")
    assert css.startswith("@font-face") and f'font-family: "{FAMILY}"' in css and "format(\"woff2\")" in css
    assert base64.b64decode(css.split("base64,", 1)[1].split(")", 1)[0])[:4] == b"wOF2"


def test_the_subset_holds_the_text_and_the_always_characters_and_little_else():
    css = font_face_css("我 爱 学习")
    cmap = _font(css).getBestCmap()
    assert {ord(c) for c in "我爱学习"} <= set(cmap)
    assert {ord(c) for c in "0123456789abcXYZ%，。"} <= set(cmap)  # from ALWAYS: every page has numbers
    assert covered("我爱学习，注意", font_face_css("我爱学习，注意"))
    assert not covered("鬱", css)  # the control: a character not asked for is not there
    assert len(css) < 200_000  # tens of kilobytes, not the 19 MB collection


def test_the_stack_puts_the_embedded_face_after_the_latin_ones():
    assert font_stack("DejaVu Sans") == f'"DejaVu Sans", "{FAMILY}", sans-serif'
