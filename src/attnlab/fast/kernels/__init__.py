"""attnlab's own CPU kernels: compiled from C++ ahead of time by ``attnlab kernels``, loaded when present.

Two kernels, built into one library:

* ``torch.ops.attnlab_cpu.int8_linear`` (``int8_linear.cpp``), the weight-only int8 product that decoding on a
  CPU is bound by: it streams the int8 codes at a plain sum's speed, where torch's own int8 weight kernel
  (``aten._weight_int8pack_mm``) ran 15 times slower at one row on an AVX-512 Xeon with VNNI, and torchao's CPU path
  widens the whole weight to fp32 at every call (docs/decoding.md has the measurements).
* ``torch.ops.attnlab_cpu.fp32_linear`` (``fp32_linear.cpp``), an fp32 ``nn.Linear`` product for the few rows of a
  decoding step (:class:`~attnlab.fast.linear.FastLinear`), which reads the weights 1.6-2.5 times as fast as torch's
  on AMD EPYC guests (benchmarks/results/linear.md).

Nothing is compiled while a model runs: a build takes about a minute, and a user who asked for a sample must not
wait for one without a word. ``attnlab kernels`` (``make demo`` and ``make test`` run it once) compiles the
library in a fresh directory of its own and moves the finished file into place in one rename, so a build killed
part-way leaves nothing that a later run waits on, and two builds at once cannot spoil each other's file. The place
is named by everything the binary depends on (the sources, the flags, torch's and Python's versions), under
``$TORCH_EXTENSIONS_DIR/attnlab`` (default ``~/.cache/attnlab/kernels``): two checkouts with the same sources share
one build, and different sources never overwrite each other's.

Where the library is not built (or cannot be: no compiler, no AVX2, not x86; or ``ATTNLAB_CPU_KERNELS=0``),
attnlab uses torch's kernels instead, gives the same numbers (to rounding, for fp32) more slowly, and says why once
(:func:`status`).
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import sys
import tempfile
import threading
from pathlib import Path

import torch

SOURCES = tuple(Path(__file__).with_name(name) for name in ("int8_linear.cpp", "fp32_linear.cpp"))
# -fopenmp: at::parallel_for is a template that runs on one thread unless OpenMP is on (torch's own libgomp is the
# one loaded, so the threads are torch's); -ffp-contract=off: a scale and a bias rounded one after the other, as
# torch's two operations would
CFLAGS = ("-O3", "-mavx2", "-mfma", "-fopenmp", "-ffp-contract=off")
LDFLAGS = ("-fopenmp",)
DISABLE_VARIABLE = "ATTNLAB_CPU_KERNELS"
LIBRARY = "attnlab_cpu.so"
BUILD_COMMAND = "attnlab kernels"

_lock = threading.Lock()
_state: dict[str, object] = {"tried": False, "ready": False, "why": "not loaded yet"}
#: ``[whether the kernels are loaded]``: read by every few-row product, so a list a check reads without a call
READY = [False]


def why_not_buildable() -> str | None:
    """Why this machine cannot run the kernels, or None where it can."""
    if os.environ.get(DISABLE_VARIABLE, "1") == "0":
        return f"{DISABLE_VARIABLE}=0 is set"
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return f"the kernels are written for x86-64 with AVX2, this machine is {platform.machine()}"
    if torch.backends.cpu.get_cpu_capability() not in ("AVX2", "AVX512"):
        return f"this CPU has no AVX2 (torch reports {torch.backends.cpu.get_cpu_capability()})"
    return None


def build_key() -> str:
    """What the binary depends on, hashed: a changed source, flag, torch or Python is a new build in a new place."""
    digest = hashlib.sha256()
    for source in SOURCES:
        digest.update(source.read_bytes())
    digest.update(repr((CFLAGS, LDFLAGS, torch.__version__, sys.version_info[:2], platform.machine())).encode())
    return digest.hexdigest()[:16]


def library_path() -> Path:
    """Where the built library lives (it may not exist)."""
    root = os.environ.get("TORCH_EXTENSIONS_DIR")
    base = Path(root) / "attnlab" if root else Path.home() / ".cache" / "attnlab" / "kernels"
    return base / build_key() / LIBRARY


def build(verbose: bool = False) -> Path:
    """Compile the library (about a minute) and move it into place; returns its path. Raises a RuntimeError saying
    why where it cannot be built. A build already in place is kept."""
    target = library_path()
    if target.is_file():
        return target
    why = why_not_buildable()
    if why is not None:
        raise RuntimeError(why)
    from torch.utils.cpp_extension import load_inline

    try:  # the ninja of the `ninja` package (a dependency), where the environment's bin is not on PATH
        import ninja

        os.environ["PATH"] = os.pathsep.join([ninja.BIN_DIR, os.environ.get("PATH", "")])
    except ImportError:
        pass
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="build-", dir=target.parent))  # this build's own: nobody else waits on it
    try:
        load_inline("attnlab_cpu", cpp_sources=[s.read_text(encoding="utf-8") for s in SOURCES],
                    is_python_module=False, extra_cflags=list(CFLAGS), extra_ldflags=list(LDFLAGS),
                    build_directory=str(work), verbose=verbose)
        os.replace(work / LIBRARY, target)  # one rename: the file is whole or absent, never half-written
    except Exception as error:
        raise RuntimeError(f"the build failed: {type(error).__name__}: {_last_line(error)}") from error
    finally:
        shutil.rmtree(work, ignore_errors=True)
    with _lock:
        _state.update(tried=True, ready=True, why="")
        READY[0] = True
    _register_shapes()
    return target


def _last_line(error: Exception) -> str:
    lines = str(error).strip().splitlines()
    return lines[-1] if lines else type(error).__name__


def load() -> bool:
    """Load the built library the first time it is asked for; whether the kernels are ready. Never builds."""
    with _lock:
        if _state["tried"]:
            return bool(_state["ready"])
        _state["tried"] = True
        why, path = why_not_buildable(), library_path()
        if why is None and not path.is_file():
            why = f"they are not built: `{BUILD_COMMAND}` builds them (about a minute, once)"
        if why is None:
            try:
                torch.ops.load_library(str(path))
            except OSError as error:  # a library from another machine, say: torch's kernels still work
                why = f"the built library could not be loaded ({_last_line(error)}); `{BUILD_COMMAND}` again"
        _state.update(ready=why is None, why=why or "")
        READY[0] = why is None
    if why is None:
        _register_shapes()
    return why is None


def _register_shapes() -> None:
    """The kernels' output shapes, for ``torch.compile`` (once per process)."""
    if _state.get("shapes"):
        return
    _state["shapes"] = True

    @torch.library.register_fake("attnlab_cpu::int8_linear")
    def _(x: torch.Tensor, weight: torch.Tensor, scales: torch.Tensor,
          bias: torch.Tensor | None = None) -> torch.Tensor:
        return x.new_empty(*x.shape[:-1], scales.shape[0])

    @torch.library.register_fake("attnlab_cpu::fp32_linear")
    def _(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        return x.new_empty(*x.shape[:-1], weight.shape[0])


def ready() -> bool:
    """Whether the kernels are loaded (without trying to load them)."""
    return bool(_state["ready"])


def status() -> str:
    """One line for the user: the kernels in use, or why not."""
    load()
    return "attnlab's AVX2 kernels" if ready() else f"torch's kernels (attnlab's are not in use: {_state['why']})"
