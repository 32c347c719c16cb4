"""Text as people write it: unspaced Chinese on the command line, Chinese help that lines up, Chinese headings."""

from __future__ import annotations

import json
import re
import textwrap
import unicodedata

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from attnlab.cli import main
from attnlab.cli.help_format import CLOSING, OPENING, wrap

NOTE = "No spaces between the Chinese characters, so each character is one token: 我 / 爱 / 学 / 习 / AI."


def run(*args: str):
    return CliRunner().invoke(main, list(args), prog_name="attnlab")


def cells(text: str) -> int:
    """Terminal columns, from the Unicode database (wide and full-width characters take two)."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


@pytest.mark.parametrize("command", ["explain", "heatmap", "view"])
def test_unspaced_chinese_is_read_character_by_character_and_said_once(command, tmp_path):
    out = tmp_path / ("x.png" if command == "heatmap" else "x.html")
    args = ["--json"] if command == "explain" else ["-o", str(out)]
    result = run(command, "我爱学习AI", *args)
    assert result.exit_code == 0, result.output
    assert result.stderr.count(NOTE) == 1 and len(result.stderr.strip().splitlines()) == 1
    assert NOTE not in result.stdout
    if command == "explain":
        assert json.loads(result.stdout)["tokens"] == ["我", "爱", "学", "习", "AI"]
    else:
        assert out.exists()


def test_a_spaced_sentence_keeps_its_words_and_says_nothing():
    result = run("explain", "我 爱 学习 AI", "--json")
    assert result.exit_code == 0 and result.stderr == ""
    assert json.loads(result.stdout)["tokens"] == ["我", "爱", "学习", "AI"]


def test_the_note_is_chinese_in_chinese():
    result = run("explain", "我爱学习AI", "--query", "爱", "--lang", "zh")
    assert result.exit_code == 0
    assert "汉字之间没有空格，所以每个字是一个词元：我 / 爱 / 学 / 习 / AI。" in result.stderr
    assert "随机缩放点积模型（种子 123）" in result.stdout and "random scaled" not in result.stdout


def test_a_real_tokenizer_tokenizes_as_it_does():
    from attnlab.pretrained import load_bert

    tokens = load_bert().tokenizer.encode("我爱学习AI").tokens
    result = run("explain", "我爱学习AI", "--model", "bert", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["tokens"] == tokens
    # no word of unspaced text (the tokenizer has its own rule); only that it reads 爱 and 习 as [UNK]
    assert result.stderr.splitlines() == [line for line in result.stderr.splitlines() if "[UNK]" in line] != []


def wrapped_lines(help_text: str) -> list[str]:
    """The lines attnlab wraps: the usage, the description and the options (the examples after them are kept as
    written)."""
    blocks = help_text.split("\n\n")
    options = next(k for k, block in enumerate(blocks) if block.startswith(("Options:", "选项：")))
    return "\n\n".join(blocks[: options + 1]).splitlines()


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("command", ["explain", "heatmap", "view", "train", "translate"])
def test_help_lines_up_in_cells_and_fits_the_width(command, lang):
    lines = wrapped_lines(run(command, "--help", "--lang", lang).output)
    assert max(cells(line) for line in lines) <= 80  # click's width under its test runner
    described = [re.match(r"(  -\S.*?\S {2,})\S", line) for line in lines]
    starts = {cells(m.group(1)) for m in described if m}
    assert len(starts) == 1 and len([m for m in described if m]) >= 5, starts  # descriptions start in one column
    assert not [line for line in lines if line.strip() and line.strip()[0] in "，。、；：？！）」』】》"]  # no closing
    # mark starts a line


def test_headings_use_one_colon_per_language():
    chinese = run("explain", "--help", "--lang", "zh").output
    assert chinese.startswith("用法：attnlab explain") and "\n选项：\n" in chinese
    assert "\n命令：\n" in run("--help", "--lang", "zh").output
    assert not re.search(r"[\u4e00-\u9fff]:", chinese)  # no half-width colon after a Chinese word
    english = run("explain", "--help").output
    assert english.startswith("Usage: attnlab explain") and "\nOptions:\n" in english


words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=10)


@given(st.lists(words, min_size=1, max_size=30), st.integers(16, 60))
def test_latin_text_wraps_as_textwrap_does(ws, width):  # words that fit a line: textwrap cuts longer ones otherwise
    text = " ".join(ws)
    assert wrap(text, width, "  ", "    ") == textwrap.wrap(text, width, initial_indent="  ", subsequent_indent="    ")


# punctuation stands right after (closing) or before (opening) a character, as in written Chinese
pieces = st.one_of(st.sampled_from(["我", "爱", "学", "习", "人工", "智能", "的", "注意力", "我，", "爱。", "（学",
                                    "习）", "「智", "能」", "：", "；"]), words, st.just(" "))


@given(st.lists(pieces, min_size=1, max_size=60).map("".join), st.integers(10, 50))
def test_chinese_wraps_in_cells_between_characters(text, width):
    lines = wrap(text, width, "  ", "  ")
    assert all(cells(line) <= width for line in lines)
    assert "".join(lines).replace(" ", "") == text.replace(" ", "")  # nothing lost, added or moved
    for line in lines:
        assert not line.strip() or line.strip()[0] not in CLOSING or text.lstrip().startswith(line.strip()[0])
        assert not line.strip() or line.rstrip()[-1] not in OPENING
