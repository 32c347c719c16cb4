"""Cases run in forked children: results come back, memory is the case's own, failures are reported."""

import subprocess
import sys

from attnlab.bench.cases import Case
from attnlab.bench.worker import run_forked


def _request(case: Case, **over) -> dict:
    return {"case": case.as_dict(), "repeats": 3, "single_call": False, "seed": 0, "timeout": 3600, **over}


def test_a_numpy_case_runs():
    out = run_forked(_request(Case("sweep", "numpy-chunked", 1, 8, 16, 2, True)))
    assert out["status"] == "ok" and len(out["times"]) == 3 and all(t > 0 for t in out["times"])
    assert out["peak_extra_bytes"] >= 0


def test_peak_memory_is_the_score_matrix():
    # numpy-math, B=1, h=1, T=4096: one in-place fp32 score matrix of 4096²·4 B = 64 MiB (plus a small floor:
    # BLAS buffers, thread stacks).
    out = run_forked(_request(Case("sweep", "numpy-math", 1, 4096, 8, 1, False), repeats=1))
    assert out["status"] == "ok"
    assert 64 * 2**20 <= out["peak_extra_bytes"] < 112 * 2**20
    # numpy-chunked never holds it: its peak is a block of 512 x 1024 scores (2 MiB) over the same floor.
    chunked = run_forked(_request(Case("sweep", "numpy-chunked", 1, 4096, 8, 1, False), repeats=1))
    assert chunked["peak_extra_bytes"] < out["peak_extra_bytes"] / 2


def test_single_call_times_the_first_call():
    out = run_forked(_request(Case("sweep", "numpy-math", 1, 4, 8, 2, False), single_call=True))
    assert out["times"] == [out["first_call_s"]]


def test_a_failing_case_is_reported_not_raised():
    out = run_forked(_request(Case("sweep", "numpy-math", 1, 4, 8, 3, False)))  # 3 heads do not divide 8
    assert out["status"] == "failed" and "num_heads must be a positive divisor" in out["reason"]


def test_a_case_over_its_memory_limit_fails_cleanly():
    # 2 GiB of scores under a 64 MiB address-space allowance: MemoryError in the child, a report here.
    out = run_forked(_request(Case("sweep", "numpy-math", 1, 8192, 64, 8, False), memory_limit=64 * 2**20))
    assert out == {"status": "failed", "reason": "out of memory"}


def test_a_case_past_its_timeout_is_killed():
    # a million repeats of a 2048-token case: no machine ends them within the 50 ms
    out = run_forked(_request(Case("sweep", "numpy-math", 1, 2048, 64, 8, False), repeats=10**6, timeout=0.05))
    assert out == {"status": "failed", "reason": "timed out after 0 s"}


def test_torch_cases_run_in_the_worker_process():
    # The real path: the worker imports torch once and forks; one request per line, one answer per line.
    import json

    requests = [_request(Case("sweep", backend, 1, 8, 16, 2, True)) for backend in ("sdpa", "math", "numpy-math")]
    done = subprocess.run([sys.executable, "-m", "attnlab.bench.worker", "--torch"],
                          input="".join(json.dumps(r) + "\n" for r in requests), text=True, capture_output=True)
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert answers[0] == {"ready": True}
    assert [a["status"] for a in answers[1:]] == ["ok", "ok", "ok"], done.stderr
