"""The font embedded in pages: a WOFF2 subset of the packaged Noto Sans CJK holding exactly what the page shows."""

from __future__ import annotations

import base64
import io

from fontTools.ttLib import TTFont

from attnlab.viz.webfont import FAMILY, SYMBOLS, covered, font_face_css, font_stack, unicode_range


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


def test_the_stack_puts_the_embedded_faces_first_for_all_but_ascii():
    assert font_stack("DejaVu Sans") == f'"{FAMILY}", "{SYMBOLS}", "DejaVu Sans", sans-serif'
    assert unicode_range(frozenset("ab我戒戓戔é")) == "U+E9, U+6211-6214"  # ASCII left to the Latin fonts
    assert "unicode-range: U+" in font_face_css("我") and unicode_range(frozenset("abc")) == "U+0"


def test_what_noto_sans_cjk_lacks_comes_from_dejavu_sans():
    """Xᵀ and ✗ (the report's): not in Noto Sans CJK, so a second rule carries them; a page needs no system font."""
    css = font_face_css("softmax(X Xᵀ) 2031-07-15 ✗ 注意力")
    assert css.count("@font-face") == 2 and f'font-family: "{SYMBOLS}"' in css
    assert "ᵀ" not in "".join(chr(c) for c in _font(css).getBestCmap())  # the first rule: Noto's
    assert covered("softmax(X Xᵀ) 2031-07-15 ✗ 注意力", css)
    assert font_face_css("注意力").count("@font-face") == 1  # nothing lacking, no second font
