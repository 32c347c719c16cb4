"""Words of a text as people write it: on whitespace, and character by character where a script uses no spaces.

Chinese and Japanese put no spaces between words, so ``"我爱学习AI".split()`` is one "word", the whole sentence.
Without a dictionary no program knows that 学习 is one word; the honest split is one token per character, as a
character-level model reads it. The texts write their examples with the spaces put in by hand (``我 爱 学习 AI``),
and such a text keeps its words.

The rule, in one place (:func:`split_words`):

* a text with a space between two CJK characters anywhere (``"我 爱 学习 AI"``) was segmented by its writer:
  it is split on whitespace only, ``学习`` stays one word;
* otherwise each CJK character is a word of its own, and a run of any other script stays one word, as
  whitespace splitting gives it: ``"我爱学习AI"`` -> ``我 / 爱 / 学 / 习 / AI``,
  ``"2031年7月15日"`` -> ``2031 / 年 / 7 / 月 / 15 / 日``.

CJK here means the scripts written without spaces: Han ideographs, kana, CJK punctuation and full-width
forms. Korean puts spaces between its words, so Hangul splits on whitespace like Latin.
"""

from __future__ import annotations

import re

# Han (radicals, ideographs, extensions, compatibility), kana, bopomofo, CJK punctuation and symbols,
# vertical and small forms, full-width forms and half-width katakana. Hangul (3130-318F, AC00-D7AF, FFA0-FFDC) is
# left out on purpose: Korean is written with spaces.
CJK_CLASS = ("\u2e80-\u312f\u3190-\u33ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\ufe10-\ufe1f\ufe30-\ufe4f"
             "\uff00-\uff9f\uffe0-\uffef\U00020000-\U0003ffff")
_CJK = re.compile(f"[{CJK_CLASS}]")
_PIECE = re.compile(f"[{CJK_CLASS}]|[^\\s{CJK_CLASS}]+")  # one CJK character, or a run of anything else but spaces
_SPACED = re.compile(f"[{CJK_CLASS}]\\s+[{CJK_CLASS}]")


def is_unspaced(text: str) -> bool:
    """Whether ``text`` is Chinese or Japanese as people write it (``"我爱学习AI"``): a whitespace word holds a CJK
    character and something more, and no space stands between two CJK characters anywhere."""
    return _SPACED.search(text) is None and any(len(word) > 1 and _CJK.search(word) for word in text.split())


def split_words(text: str) -> list[str]:
    """The words of ``text``: whitespace-separated, and each CJK character one word when the text is unspaced
    (:func:`is_unspaced`); see the module's docstring for the rule."""
    if not is_unspaced(text):
        return text.split()
    return _PIECE.findall(text)
