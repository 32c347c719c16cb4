"""Every page of docs/ has a Chinese twin in docs/zh/ that links back, has the same outline and the same code.

The checks are structural on purpose: a twin that is a stub, lost a section, changed an example or dropped a name
(an option, a case id) fails, so the translation cannot drift from the English page silently.
"""

import re
from pathlib import Path

import pytest

from docs_text import broken_links, comparable_code, headings, inline_code, numbers

DOCS = Path(__file__).resolve().parents[1] / "docs"
ZH = DOCS / "zh"
PAGES = sorted(p.name for p in DOCS.glob("*.md"))


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def test_every_page_has_a_twin_and_no_twin_is_an_orphan():
    assert PAGES, "no pages in docs/"
    assert sorted(p.name for p in ZH.glob("*.md")) == PAGES


@pytest.mark.parametrize("name", PAGES)
def test_the_twins_link_each_other(name):
    assert _text(DOCS / name).splitlines()[0] == f"中文: [zh/{name}](zh/{name})"
    assert _text(ZH / name).splitlines()[0] == f"English: [../{name}](../{name})"


@pytest.mark.parametrize("name", PAGES)
def test_the_twin_has_the_same_outline(name):
    assert headings(_text(ZH / name)) == headings(_text(DOCS / name))


@pytest.mark.parametrize("name", PAGES)
def test_the_twin_has_the_same_code(name):
    """Same fenced blocks in the same order; Python, shell and TOML identical except for comments."""
    english, chinese = comparable_code(_text(DOCS / name)), comparable_code(_text(ZH / name))
    assert [lang for lang, _ in chinese] == [lang for lang, _ in english]
    for index, (want, got) in enumerate(zip(english, chinese, strict=True)):
        assert got == want, f"code block {index} of docs/zh/{name} differs from docs/{name}"


@pytest.mark.parametrize("name", PAGES)
def test_the_twin_keeps_every_name(name):
    """Every `inline code` span of the English page (names, options, values, error texts) is in the twin."""
    missing = inline_code(_text(DOCS / name)) - inline_code(_text(ZH / name))
    assert not missing, f"missing from docs/zh/{name}: {sorted(missing)}"


@pytest.mark.parametrize("name", PAGES)
def test_the_twin_cites_the_same_figures(name):
    """Every number of the English page (measurements, tolerances, parameter counts) is written on the twin."""
    missing = numbers(_text(DOCS / name)) - numbers(_text(ZH / name))
    assert not missing, f"figures missing from docs/zh/{name}: {sorted(missing)}"


@pytest.mark.parametrize("name", PAGES)
def test_the_twin_links_resolve(name):
    """Every local link and anchor of the twin resolves, or is broken on the English page too."""
    extra = broken_links(ZH / name) - broken_links(DOCS / name)
    assert not extra, f"broken links in docs/zh/{name}: {sorted(extra)}"


def test_the_bad_input_twin_lists_the_same_cases():
    """tests/cli/test_bad_input.py checks the English list against the cases; the twin lists the same ids."""
    def ids(path: Path) -> set[str]:
        return set(re.findall(r"`([a-z0-9]+(?:-[a-z0-9]+)+)`", _text(path)))

    assert ids(ZH / "bad-input.md") == ids(DOCS / "bad-input.md")
