"""attnlab's C++ kernels are built ahead of time, never while a command waits: where the build lives, what a build
killed part-way leaves, what a run does where nothing is built, and the command that builds them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from attnlab.fast import kernels


def test_the_build_is_named_by_everything_the_binary_depends_on(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    path = kernels.library_path()
    assert path.parent.parent == tmp_path / "attnlab" and path.name == kernels.LIBRARY
    key = kernels.build_key()
    monkeypatch.setattr(kernels, "CFLAGS", (*kernels.CFLAGS, "-DANOTHER"))
    assert kernels.build_key() != key  # another flag (or source, torch, Python): another place, never overwritten


def test_loading_never_builds_and_says_how_to(monkeypatch, tmp_path):
    """An empty build cache: the kernels are not in use, the reason names the command, and nothing was compiled."""
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    monkeypatch.setattr(kernels, "_state", {"tried": False, "ready": False, "why": "not loaded yet"})
    monkeypatch.setattr(kernels, "READY", [False])
    monkeypatch.setattr(kernels, "build", lambda *a, **k: pytest.fail("load() must never build"))
    assert kernels.load() is False and not kernels.ready()
    assert "`attnlab kernels` builds them" in kernels.status()
    assert not any(tmp_path.rglob("*.so"))


def test_the_variable_turns_the_kernels_off(monkeypatch):
    monkeypatch.setenv(kernels.DISABLE_VARIABLE, "0")
    assert kernels.why_not_buildable() == f"{kernels.DISABLE_VARIABLE}=0 is set"


def test_a_failed_build_leaves_nothing_behind_and_says_why(monkeypatch, tmp_path):
    """A build that fails (no compiler, or killed) leaves no library and no lock: the next run is not held up."""
    import torch.utils.cpp_extension as cpp

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))

    def failing(*args, build_directory: str, **kwargs):
        (Path(build_directory) / "lock").write_text("")  # torch's own baton, as a killed build would leave it
        raise OSError("no such file: c++")

    monkeypatch.setattr(cpp, "load_inline", failing)
    with pytest.raises(RuntimeError, match=r"the build failed: OSError: no such file: c\+\+"):
        kernels.build()
    assert list(kernels.library_path().parent.iterdir()) == []  # its work directory went with it


@pytest.mark.slow
def test_the_command_builds_into_an_empty_cache_and_a_second_run_keeps_it(tmp_path):
    """``attnlab kernels`` into a fresh cache: a whole library, moved into place in one rename; then ``--status``
    finds it in use, and a second build keeps it."""
    if kernels.why_not_buildable() is not None:
        pytest.skip(kernels.why_not_buildable())
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(tmp_path)}
    run = [sys.executable, "-m", "attnlab", "kernels"]
    built = subprocess.run(run, env=env, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr
    libraries = list(tmp_path.rglob("*.so"))
    assert len(libraries) == 1 and libraries[0].name == kernels.LIBRARY
    status = subprocess.run([*run, "--status"], env=env, capture_output=True, text=True, timeout=120)
    assert "(built)" in status.stdout and "attnlab's AVX2 kernels" in status.stdout
    again = subprocess.run(run, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "built already" in again.stdout
    assert not [p for p in libraries[0].parent.iterdir() if p.name != kernels.LIBRARY]  # no work dir, no lock
