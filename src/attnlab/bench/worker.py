"""Runs cases in fresh processes: ``python -m attnlab.bench.worker`` reads one JSON request per
line on stdin and answers one JSON result per line on stdout.

The worker imports torch and NumPy once and then *forks* a child per case, so each case starts
from a clean address space (its peak memory is its own) without paying torch's import again. The
worker itself never computes anything: OpenMP thread pools must not exist before a fork.

Peak extra memory is the child's high-water resident set during the first call minus its resident
set just before it (Linux: ``/proc/self/clear_refs`` resets the high-water mark). Elsewhere it
falls back to the ``ru_maxrss`` growth, which misses peaks below the process's earlier maximum.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import select
import signal
import sys
import time
import timeit
import traceback
from typing import Any, get_args

import numpy as np

from attnlab.bench.cases import NUMPY_BACKENDS, Case
from attnlab.i18n import N_

#: why a case failed (English in the results; shown translated, see attnlab.bench.cases.SKIPPED)
OUT_OF_MEMORY = N_("out of memory")
TIMED_OUT = N_("timed out after {seconds} s")
DIED = N_("the process died (wait status {status}; out of memory?)")
FAILED = (OUT_OF_MEMORY, TIMED_OUT, DIED)


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _status_bytes(field: str) -> int:
    """``_status_kib(field)`` in bytes, where the peak could be reset (Linux: the file and its fields are there)."""
    kib = _status_kib(field)
    assert kib is not None
    return kib * 1024


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")  # 5: reset the peak resident set size to the current one
        return True
    except OSError:
        return False


def _maxrss_bytes() -> int:
    scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def weights(d_model: int, seed: int) -> dict[str, np.ndarray]:
    """The same random projections for every backend, as ``MultiHeadAttention`` names them."""
    rng = np.random.default_rng(seed)
    params = {f"{n}.weight": rng.standard_normal((d_model, d_model), dtype=np.float32) * d_model**-0.5
              for n in ("W_query", "W_key", "W_value", "out_proj")}
    params["out_proj.bias"] = rng.standard_normal(d_model, dtype=np.float32) * 0.02
    return params


def _backend(name: str, kinds: object) -> Any:
    """``name`` as the backend literal of ``kinds`` (a ``Literal`` type) it is: the request came as JSON text."""
    for kind in get_args(kinds):
        if kind == name:
            return kind
    raise ValueError(f"unknown backend {name!r}; expected one of {get_args(kinds)}")


def build(case: Case, seed: int):
    """A no-argument callable that runs the case's forward pass once."""
    x = np.random.default_rng(seed + 1).standard_normal((case.batch, case.seq_len, case.d_model), dtype=np.float32)
    params = weights(case.d_model, seed)
    if case.backend in NUMPY_BACKENDS:
        from attnlab.numpy import multi_head_attention
        from attnlab.numpy.checks import Backend as NumpyBackend

        backend: NumpyBackend = _backend(case.backend.removeprefix("numpy-"), NumpyBackend)
        return lambda: multi_head_attention(x, params, case.num_heads, is_causal=case.is_causal, backend=backend)
    import torch

    from attnlab.attention import MultiHeadAttention
    from attnlab.functional import Backend

    mha = MultiHeadAttention(case.d_model, case.d_model, num_heads=case.num_heads, is_causal=case.is_causal,
                             backend=_backend(case.backend, Backend))
    mha.load_state_dict({k: torch.from_numpy(v) for k, v in params.items()})
    mha.eval()
    tx = torch.from_numpy(x)

    def forward():
        with torch.inference_mode():
            return mha(tx)

    return forward


def run_case(case: Case, repeats: int, single_call: bool, seed: int, warmup: int = 1) -> dict:
    """Time one case in this process: the first call measures memory, then ``warmup`` untimed calls
    (the first call also paid for page faults and thread start-up), then ``repeats`` timed calls."""
    forward = build(case, seed)
    gc.collect()
    exact = _reset_peak()
    before = _status_bytes("VmRSS") if exact else _maxrss_bytes()
    start = time.perf_counter()
    forward()
    first = time.perf_counter() - start
    peak = (_status_bytes("VmHWM") if exact else _maxrss_bytes()) - before
    if single_call:
        times = [first]
    else:
        for _ in range(warmup):
            forward()
        times = timeit.Timer(forward).repeat(repeat=repeats, number=1)
    return {"status": "ok", "times": times, "first_call_s": first, "peak_extra_bytes": max(peak, 0),
            "memory_method": "VmHWM" if exact else "ru_maxrss"}


def _child(request: dict, write_fd: int) -> None:
    try:
        size = _status_kib("VmSize")
        if request.get("memory_limit") and size:  # fail with MemoryError, not by the OOM killer
            limit = size * 1024 + int(1.5 * request["memory_limit"])
            hard = resource.getrlimit(resource.RLIMIT_AS)[1]
            if hard != resource.RLIM_INFINITY:  # a limit set by the user (ulimit -v) cannot be raised
                limit = min(limit, hard)
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        result = run_case(Case(**request["case"]), request["repeats"], request["single_call"], request["seed"],
                          request.get("warmup", 1))
    except MemoryError:
        result = {"status": "failed", "reason": OUT_OF_MEMORY}
    except Exception as e:  # report anything else as a failed case, never kill the run
        result = {"status": "failed", "reason": f"{type(e).__name__}: {e}"[:300],
                  "traceback": traceback.format_exc()[-2000:]}
    os.write(write_fd, json.dumps(result).encode())


def run_forked(request: dict) -> dict:
    """Run one request in a forked child, with a timeout."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read_fd)
        try:
            _child(request, write_fd)
        finally:
            os._exit(0)
    os.close(write_fd)
    chunks, deadline = [], time.monotonic() + request["timeout"]
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([read_fd], [], [], left)[0]:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(read_fd)
            return {"status": "failed", "reason": TIMED_OUT.format(seconds=f"{request['timeout']:.0f}")}
        chunk = os.read(read_fd, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read_fd)
    _, status = os.waitpid(pid, 0)
    if not chunks:
        return {"status": "failed", "reason": DIED.format(status=status)}
    return json.loads(b"".join(chunks))


def main() -> None:
    if "--torch" in sys.argv[1:]:
        import torch  # noqa: F401  (imported once here, inherited by every child)

        import attnlab.attention
    import attnlab.numpy  # noqa: F401

    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(run_forked(json.loads(line))), flush=True)


if __name__ == "__main__":
    main()
