"""attnlab's own CPU kernels, compiled from C++ the first time they are needed and cached by PyTorch.

Two kernels, built into one library:

* ``torch.ops.attnlab_cpu.int8_linear`` (``int8_linear.cpp``), the weight-only int8 product that decoding on a
  CPU is bound by. torch's own int8 kernel is vectorized for AVX-512 only, and on the AVX2 CPUs most machines have
  it runs a scalar loop; torchao's CPU path converts the whole weight to fp32 on every call (docs/decoding.md has
  the measurements).
* ``torch.ops.attnlab_cpu.fp32_linear`` (``fp32_linear.cpp``), an fp32 ``nn.Linear`` product for the few rows of a
  decoding step (:func:`attnlab.functional.linear.linear`), which reads the weights about twice as fast as torch's.

The build uses ``torch.utils.cpp_extension``: a C++ compiler and ninja, about a minute once, then a cached library
in ``TORCH_EXTENSIONS_DIR`` (``~/.cache/torch_extensions`` by default).

Where they cannot be built (no compiler, no AVX2, not x86) or ``ATTNLAB_CPU_KERNELS=0`` is set, attnlab uses
torch's kernels instead, says why once (:func:`cpu_kernels_status`), and gives the same numbers (to rounding, for
fp32) more slowly.
"""

from __future__ import annotations

import hashlib
import logging
import os
import platform
import threading
import warnings
from pathlib import Path

import torch

SOURCES = tuple(Path(__file__).with_name(name) for name in ("int8_linear.cpp", "fp32_linear.cpp"))
DISABLE_VARIABLE = "ATTNLAB_CPU_KERNELS"
_log = logging.getLogger(__name__)
_lock = threading.Lock()
_status: dict[str, object] = {"tried": False, "ready": False, "why": "not built yet"}


def _why_not() -> str | None:
    """Why this machine cannot build the kernels, or None where it can."""
    if os.environ.get(DISABLE_VARIABLE, "1") == "0":
        return f"{DISABLE_VARIABLE}=0 is set"
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return f"the kernels are written for x86-64 with AVX2, this machine is {platform.machine()}"
    if torch.backends.cpu.get_cpu_capability() not in ("AVX2", "AVX512"):
        return f"this CPU has no AVX2 (torch reports {torch.backends.cpu.get_cpu_capability()})"
    return None


def _library_name() -> str:
    """The build's name, after its sources: a changed kernel is a new build (and is said to be one), never an old
    library loaded in its place."""
    return "attnlab_cpu_" + hashlib.sha256(b"".join(s.read_bytes() for s in SOURCES)).hexdigest()[:10]


def _build() -> None:
    from torch.utils.cpp_extension import load_inline

    try:  # the ninja of the `ninja` package (a dependency), where the environment's bin is not on PATH
        import ninja

        os.environ["PATH"] = os.pathsep.join([ninja.BIN_DIR, os.environ.get("PATH", "")])
    except ImportError:
        pass

    _log.info("building attnlab's CPU kernels (once; about a minute)")
    load_inline(_library_name(), cpp_sources=[s.read_text(encoding="utf-8") for s in SOURCES], is_python_module=False,
                # -fopenmp: at::parallel_for is a template that runs on one thread unless OpenMP is on (torch's
                # own libgomp is the one loaded, so the threads are torch's); -ffp-contract=off: a scale and a bias
                # rounded one after the other, as torch's two operations would
                extra_cflags=["-O3", "-mavx2", "-mfma", "-fopenmp", "-ffp-contract=off"], extra_ldflags=["-fopenmp"],
                verbose=False)

    @torch.library.register_fake("attnlab_cpu::int8_linear")
    def _(x: torch.Tensor, weight: torch.Tensor, scales: torch.Tensor,
          bias: torch.Tensor | None = None) -> torch.Tensor:  # shapes for torch.compile
        return x.new_empty(*x.shape[:-1], scales.shape[0])

    @torch.library.register_fake("attnlab_cpu::fp32_linear")
    def _(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        return x.new_empty(*x.shape[:-1], weight.shape[0])


def ensure_cpu_kernels() -> bool:
    """Build and load the kernels the first time they are asked for; whether they are ready. Never raises: a failed
    build is a warning (with the reason) and torch's kernels are used."""
    with _lock:
        if not _status["tried"]:
            _status["tried"] = True
            why = _why_not()
            if why is None:
                try:
                    _build()
                    _status.update(ready=True, why="")
                except Exception as error:  # a missing compiler or ninja: torch's kernels still work
                    why = f"the build failed: {type(error).__name__}: {str(error).strip().splitlines()[-1:]}"
                    warnings.warn(f"attnlab: the CPU kernels could not be built ({why}); using torch's "
                                  "kernels (slower on CPUs without AVX-512)", RuntimeWarning, stacklevel=2)
            if why is not None:
                _status["why"] = why
        return bool(_status["ready"])


def cpu_kernels_built() -> bool:
    """Whether a build of the kernels is on disk already (loading it then takes a moment, not a minute)."""
    from torch.utils.cpp_extension import get_default_build_root

    root = Path(os.environ.get("TORCH_EXTENSIONS_DIR") or get_default_build_root())  # + "py311_cpu/" by default
    name = _library_name()
    return any(root.glob(f"{name}/{name}*.so")) or any(root.glob(f"*/{name}/{name}*.so"))


def cpu_kernels_to_build() -> bool:
    """Whether asking for the kernels now would compile them (a minute): not loaded, not on disk, buildable here."""
    return not _status["tried"] and _why_not() is None and not cpu_kernels_built()


def cpu_kernels_ready() -> bool:
    """Whether the kernels are loaded (without building them)."""
    return bool(_status["ready"])


def cpu_kernels_status() -> str:
    """One line for the user: the kernels in use, or why not."""
    return "attnlab's AVX2 kernels" if cpu_kernels_ready() else f"torch's kernels ({_status['why']})"
