"""Reading Markdown for the docs tests: code blocks, headings, links and inline code, outside the fences.

A translation may change the prose and the comments in the code, nothing else: the helpers here extract what
must stay the same, so a test can compare a page with its twin.
"""

import io
import re
import tokenize
from pathlib import Path

FENCE = re.compile(r"^```([\w-]*)\n(.*?)^```[ \t]*$", flags=re.S | re.M)
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
INLINE_CODE = re.compile(r"`([^`]+)`")  # a span may wrap onto the next line
ANCHOR = re.compile(r'<a id="([^"]+)"></a>')
NUMBER = re.compile(r"\d[\d,.]*\d|\d")
# Languages whose blocks are code to compare; plain ``` blocks (layouts, diagrams) may be translated.
CODE_LANGUAGES = ("python", "bash", "toml")


def code_blocks(text: str) -> list[tuple[str, str]]:
    """Every fenced block as (language, body), in order; language is '' for a plain fence."""
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(text)]


def python_blocks(path: Path) -> list[str]:
    return [body for lang, body in code_blocks(path.read_text(encoding="utf-8")) if lang == "python"]


def prose(text: str) -> str:
    """The text with its fenced blocks removed (each replaced by an empty line)."""
    return FENCE.sub("\n", text)


def headings(text: str) -> list[int]:
    """The level of every heading, in order (``## x`` is 2); lines in fenced blocks are not headings."""
    return [len(m.group(1)) for m in re.finditer(r"^(#{1,6}) \S", prose(text), flags=re.M)]


def links(text: str) -> list[str]:
    """Link targets outside fenced blocks."""
    return LINK.findall(prose(text))


def local_links(text: str) -> list[str]:
    return [t for t in links(text) if not re.match(r"[a-z]+:", t)]


def inline_code(text: str) -> set[str]:
    """Every `inline code` span outside fenced blocks, its whitespace runs made single spaces."""
    return {" ".join(span.split()) for span in INLINE_CODE.findall(prose(text))}


def numbers(text: str) -> set[str]:
    """Every figure written in the text (``1,235,814,400``, ``0.99``, ``2``), as written."""
    return set(NUMBER.findall(text))


def without_comments(body: str, language: str) -> list[str]:
    """The code's lines with comments cut off and trailing blanks stripped; lines left empty are dropped."""
    lines = body.splitlines()
    if language == "python":
        cuts = {}
        for tok in tokenize.generate_tokens(io.StringIO(body).readline):
            if tok.type == tokenize.COMMENT:
                cuts[tok.start[0] - 1] = tok.start[1]
        lines = [line[: cuts.get(i, len(line))] for i, line in enumerate(lines)]
    else:  # shell and TOML: a comment starts with '#' at the line's start or after a blank
        lines = [re.sub(r"(^|\s)#.*$", "", line) for line in lines]
    return [line.rstrip() for line in lines if line.strip()]


def comparable_code(text: str) -> list[tuple[str, list[str] | int]]:
    """Each block's language and, for code languages, its code without comments; for a plain block, whose
    words may be translated, its number of lines."""
    return [(lang, without_comments(body, lang) if lang in CODE_LANGUAGES else len(body.splitlines()))
            for lang, body in code_blocks(text)]


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens (CJK kept)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors a page offers: its headings' slugs and explicit ``<a id="...">`` tags."""
    titles = re.findall(r"^#{1,6} (.+)$", prose(text), flags=re.M)
    return {github_slug(t) for t in titles} | set(ANCHOR.findall(text))


def broken_links(page: Path) -> set[str]:
    """Local links of ``page`` whose file, or anchor in that file, does not exist, each as the resolved
    path (plus ``#anchor``), so that links from two pages to the same missing file compare equal."""
    broken = set()
    for target in local_links(page.read_text(encoding="utf-8")):
        name, _, anchor = target.partition("#")
        path = (page.parent / name).resolve() if name else page.resolve()
        if not path.exists():
            broken.add(str(path))
        elif anchor and path.suffix == ".md" and anchor not in anchors(path.read_text(encoding="utf-8")):
            broken.add(f"{path}#{anchor}")
    return broken
