"""Words as people write them: whitespace, and one word per character in Chinese written without spaces."""

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnlab.data.words import is_unspaced, split_words

# a sample of each script, named by the Unicode database (an independent account of what is what)
HAN = "我爱学习人工智能寫代碼的中年人"
KANA = "こんにちはカタカナ"
HANGUL = "한국어공부"
PUNCTUATION = "，。！？（）「」：；、"
LATIN = ["AI", "cat", "2031", "GPT-2", "x²", "naïve", "<b>"]


@pytest.mark.parametrize(("text", "words"), [
    ("我爱学习AI", ["我", "爱", "学", "习", "AI"]),                       # the texts' sentence, unspaced
    ("我 爱 学习 AI", ["我", "爱", "学习", "AI"]),                        # spaced by its writer: 学习 kept
    ("我爱学习 AI", ["我", "爱", "学", "习", "AI"]),                      # a space before AI only
    ("我爱学习 人工智能", ["我爱学习", "人工智能"]),                        # spaced between Chinese: the writer's words
    ("I love 学习", ["I", "love", "学", "习"]),
    ("2031年7月15日", ["2031", "年", "7", "月", "15", "日"]),              # digits stay numbers
    ("「你好」，世界！", ["「", "你", "好", "」", "，", "世", "界", "！"]),  # CJK punctuation is a token too
    ("我爱学习GPT-2模型", ["我", "爱", "学", "习", "GPT-2", "模", "型"]),
    ("こんにちは世界", list("こんにちは世界")),                              # Japanese is unspaced as well
    ("한국어 공부", ["한국어", "공부"]),                                    # Korean is written with spaces
    ("한국어를 배워요", ["한국어를", "배워요"]),
    ("我", ["我"]),
    ("The cat sat", ["The", "cat", "sat"]),
    ("  ", []),
])
def test_examples(text, words):
    assert split_words(text) == words


def test_unspaced_means_splitting_changes_something():
    assert is_unspaced("我爱学习AI") and is_unspaced("学习")
    assert not is_unspaced("我 爱 学习 AI") and not is_unspaced("我") and not is_unspaced("AI 我 cat")
    assert not is_unspaced("한국어공부") and not is_unspaced("hello world")


@pytest.mark.parametrize("char", list(HAN + KANA + PUNCTUATION + HANGUL))
def test_the_scripts_split_are_those_the_unicode_database_names(char):
    name = unicodedata.name(char)
    unspaced_script = name.startswith(("CJK UNIFIED IDEOGRAPH", "HIRAGANA", "KATAKANA", "IDEOGRAPHIC", "FULLWIDTH",
                                       "LEFT CORNER BRACKET", "RIGHT CORNER BRACKET"))
    assert unspaced_script != name.startswith("HANGUL")
    assert (split_words("a" + char + char) == ["a", char, char]) == unspaced_script, name


piece = st.one_of(st.sampled_from(list(HAN + KANA + HANGUL + PUNCTUATION)), st.sampled_from(LATIN))
texts = st.lists(st.tuples(piece, st.sampled_from(["", "", " ", "  ", "\t", "\n"])), max_size=12).map(
    lambda parts: "".join(p + sep for p, sep in parts))


@given(texts)
def test_no_character_is_lost_added_or_moved(text):
    assert "".join(split_words(text)) == "".join(text.split())
    assert all(word and not any(c.isspace() for c in word) for word in split_words(text))


def reference_split(text: str) -> list[str]:
    """Character by character: each CJK character of the sample alone, runs of anything else but spaces kept."""
    cjk, words, run = set(HAN + KANA + PUNCTUATION), [], ""
    for c in text:
        if c in cjk or c.isspace():
            words += [run] if run else []
            words += [c] if c in cjk else []
            run = ""
        else:
            run += c
    return words + ([run] if run else [])


@given(texts)
def test_spaced_text_splits_on_whitespace_unspaced_text_by_character(text):
    cjk = set(HAN + KANA + PUNCTUATION)
    spaced = any(a in cjk and b in cjk and gap.isspace()
                 for a, gap, b in ((text[i], text[i + 1:j], text[j]) for i in range(len(text))
                                   for j in range(i + 2, len(text))))
    changes = any(len(word) > 1 and set(word) & cjk for word in text.split())
    assert is_unspaced(text) == (changes and not spaced)
    assert split_words(text) == (reference_split(text) if is_unspaced(text) else text.split())


@given(st.lists(st.sampled_from(LATIN + list(HANGUL)), max_size=10).map(" ".join))
def test_text_without_chinese_or_japanese_is_split_on_whitespace(text):
    assert not is_unspaced(text) and split_words(text) == text.split()
