"""The READMEs' Python examples run as written, so the docs cannot rot; the Chinese one keeps the English code."""

from pathlib import Path

import pytest

from docs_text import broken_links, comparable_code, inline_code, numbers, python_blocks

ROOT = Path(__file__).resolve().parents[1]
README, README_ZH = ROOT / "README.md", ROOT / "README.zh-CN.md"
READMES = (README, README_ZH)
EXAMPLES = [(path, index, code) for path in READMES for index, code in enumerate(python_blocks(path))]


@pytest.mark.parametrize("readme", READMES, ids=lambda p: p.name)
def test_readme_has_examples(readme):
    assert len(python_blocks(readme)) >= 2


@pytest.mark.parametrize(("readme", "index", "code"), EXAMPLES, ids=[f"{p.name}-{i}" for p, i, _ in EXAMPLES])
def test_readme_example_runs(readme, index, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    exec(compile(code, f"{readme.name}[python block {index}]", "exec"), {"__name__": "__readme__"})


def test_the_translation_has_the_same_code_blocks():
    """Same blocks in the same order, the same code in each; only comments may differ."""
    english, chinese = (comparable_code(p.read_text(encoding="utf-8")) for p in READMES)
    assert [lang for lang, _ in chinese] == [lang for lang, _ in english]
    for index, (want, got) in enumerate(zip(english, chinese, strict=True)):
        assert got == want, f"code block {index} differs between README.md and README.zh-CN.md"


def test_the_translation_keeps_every_name():
    """Every `inline code` span of the English README (names, options, figures' files) is in the Chinese one."""
    english, chinese = (inline_code(p.read_text(encoding="utf-8")) for p in READMES)
    assert english <= chinese, f"missing from README.zh-CN.md: {sorted(english - chinese)}"


def test_the_translation_cites_the_same_figures():
    """Every number of the English README (benchmark figures above all) is written in the Chinese one."""
    english, chinese = (numbers(p.read_text(encoding="utf-8")) for p in READMES)
    assert english <= chinese, f"figures missing from README.zh-CN.md: {sorted(english - chinese)}"


def test_the_readmes_link_each_other():
    first = {p: p.read_text(encoding="utf-8").splitlines()[0] for p in READMES}
    assert first[README] == "中文说明: [README.zh-CN.md](README.zh-CN.md)"
    assert first[README_ZH] == "English: [README.md](README.md)"


def test_the_chinese_readme_links_resolve():
    """Every local link (and anchor) of the Chinese README resolves, or is one the English README has too."""
    extra = broken_links(README_ZH) - broken_links(README)
    assert not extra, f"broken links in README.zh-CN.md: {sorted(extra)}"
