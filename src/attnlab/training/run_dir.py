"""A run's output directory: what a training run writes there, and whether a new run may start in it."""

from __future__ import annotations

import shutil
from pathlib import Path

from attnlab.i18n import tr
from attnlab.models.checkpoint import POINTER, latest_checkpoint

#: what a run writes into its output directory (and the demo beside it: the dates' alignment); anything else there
#: is someone else's
RUN_FILES = frozenset({POINTER, "checkpoints", "tokenizer.json", "cache", "loss.png", "alignment.png"})


def check_fresh(out: Path, overwrite: bool) -> None:
    """A new run must not silently mix its checkpoints with an old run's (resume, overwrite, or refuse), nor write
    among files that are not a run's: it would replace a ``loss.png`` and ``--overwrite`` delete a ``checkpoints``."""
    old = latest_checkpoint(out)
    if old is None:
        others = sorted(p.name for p in out.iterdir() if p.name not in RUN_FILES) if out.is_dir() else []
        if others:
            shown = ", ".join(others[:5]) + (" ..." if len(others) > 5 else "")
            raise ValueError(tr("out: {out!r} holds files that are not a training run's ({shown}); choose a new or "
                                "empty directory", out=str(out), shown=shown))
        return
    if not overwrite:
        raise ValueError(tr("out: {out!r} already holds a checkpoint ({name}); resume it with --resume, replace it "
                            "with --overwrite, or choose another --out", out=str(out), name=old.name))
    (out / POINTER).unlink()
    shutil.rmtree(out / "checkpoints", ignore_errors=True)
