"""Runs a whole benchmark: the machine's limits, then every case in its own forked process."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from attnlab.bench.cases import NUMPY_BACKENDS, BenchConfig, Case, Plan, Planner
from attnlab.bench.machine import (
    machine_facts,
    matmul_gflops,
    memory_bandwidth,
    read_bandwidth,
    total_memory_bytes,
)
from attnlab.i18n import tr


@dataclass
class CaseResult:
    """One case's outcome: its timings (seconds) and memory, or why it was skipped or failed."""

    case: Case
    plan: Plan
    status: str  # "ok", "skipped" or "failed"
    reason: str = ""
    times: list[float] = field(default_factory=list)
    first_call_s: float | None = None
    peak_extra_bytes: int | None = None

    @property
    def median_s(self) -> float | None:
        return statistics.median(self.times) if self.times else None

    @property
    def spread_s(self) -> tuple[float, float] | None:
        """The interquartile range of the timed calls (min and max when there are fewer than 4)."""
        if not self.times:
            return None
        if len(self.times) < 4:
            return min(self.times), max(self.times)
        q = statistics.quantiles(self.times, n=4)
        return q[0], q[2]

    def gflops(self) -> float | None:
        return self.case.flops() / self.median_s / 1e9 if self.median_s else None

    def as_dict(self, matmul: float) -> dict:
        g = self.gflops()
        spread = self.spread_s
        return {**self.case.as_dict(), "status": self.status, "reason": self.reason, "flops": self.case.flops(),
                "repeats": len(self.times), "single_call": self.plan.single_call,
                "median_ms": None if self.median_s is None else self.median_s * 1e3,
                "spread_ms": None if spread is None else [s * 1e3 for s in spread],
                "first_call_ms": None if self.first_call_s is None else self.first_call_s * 1e3,
                "gflops": g, "percent_of_matmul": None if g is None else 100 * g / matmul,
                "peak_extra_mib": None if self.peak_extra_bytes is None else self.peak_extra_bytes / 2**20,
                "estimated_peak_mib": self.plan.est_bytes / 2**20}


@dataclass
class BenchResult:
    config: BenchConfig
    machine: dict
    matmul: dict
    bandwidth: dict
    memory_limit_bytes: int
    cases: list[CaseResult]
    seconds: float
    read_bandwidth: dict | None = None  # Limit.as_dict() of machine.read_bandwidth
    matmul_bf16: dict | None = None  # Limit.as_dict() of machine.matmul_gflops(dtype="bf16")

    def as_dict(self) -> dict:
        cfg = self.config
        return {"machine": self.machine, "matmul": self.matmul, "matmul_bf16": self.matmul_bf16,
                "bandwidth": self.bandwidth, "read_bandwidth": self.read_bandwidth,
                "memory_limit_gib": self.memory_limit_bytes / 2**30, "seconds": self.seconds,
                "config": {"seq_lens": list(cfg.seq_lens), "backends": list(cfg.backends),
                           "is_causal": list(cfg.is_causal),
                           "sweep_shape": {"batch": cfg.batch, "d_model": cfg.d_model, "num_heads": cfg.num_heads},
                           "max_case_seconds": cfg.max_case_seconds, "max_total_seconds": cfg.max_total_seconds},
                "cases": [c.as_dict(self.matmul["value"]) for c in self.cases]}


class Worker:
    """The ``attnlab.bench.worker`` process: one JSON request in, one JSON result out.

    It runs in a process group of its own, so that the terminal's Ctrl-C reaches this process alone (a worker
    interrupted while it imports torch would print its own traceback): the command says "Interrupted." and
    :meth:`kill` ends the worker and the case it forked."""

    def __init__(self, with_torch: bool) -> None:
        args = [sys.executable, "-m", "attnlab.bench.worker"] + (["--torch"] if with_torch else [])
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     process_group=0)
        assert self.proc.stdin is not None and self.proc.stdout is not None  # both are pipes
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        try:
            ready = self.stdout.readline()
        except BaseException:
            self.kill()
            raise
        if not ready.strip():
            raise RuntimeError(tr("the benchmark worker did not start (exit code {code})", code=self.proc.poll()))

    def run(self, request: dict) -> dict:
        self.stdin.write(json.dumps(request) + "\n")
        self.stdin.flush()
        line = self.stdout.readline()
        if not line:
            raise RuntimeError(tr("the benchmark worker stopped (exit code {code})", code=self.proc.poll()))
        return json.loads(line)

    def close(self) -> None:
        self.stdin.close()
        self.proc.wait(timeout=30)

    def kill(self) -> None:
        """End the worker and whatever case it is running (its process group), at once."""
        with contextlib.suppress(ProcessLookupError):  # gone already
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


def run_cases(config: BenchConfig, memory_limit: int, progress: Callable[[Case, str], None]) -> list[CaseResult]:
    planner = Planner(config, memory_limit)
    worker = Worker(with_torch=any(b not in NUMPY_BACKENDS for b in config.backends))
    results = []
    start = time.perf_counter()
    try:
        for case in config.run_order():
            plan = planner.plan(case, config.max_total_seconds - (time.perf_counter() - start))
            if plan.skip:
                results.append(CaseResult(case, plan, "skipped", plan.skip))
                progress(case, "skipped")
                continue
            request = {"case": case.as_dict(), "repeats": plan.repeats, "warmup": plan.warmup,
                       "single_call": plan.single_call, "seed": config.seed,
                       "timeout": max(60.0, 4 * plan.est_total + 30),  # generous: estimates are rough
                       "memory_limit": memory_limit}
            out = worker.run(request)
            result = CaseResult(case, plan, out["status"], out.get("reason", ""), out.get("times", []),
                                out.get("first_call_s"), out.get("peak_extra_bytes"))
            if result.status == "ok":
                assert result.median_s is not None  # a case that ran has its timed calls
                planner.learn(case, result.median_s)
            results.append(result)
            progress(case, result.status)
    except BaseException:  # Ctrl-C included: the worker in its own group would run on
        worker.kill()
        raise
    worker.close()
    order = {case: i for i, case in enumerate(config.cases())}
    return sorted(results, key=lambda r: order[r.case])  # back in the table's order


def run_bench(config: BenchConfig, progress: Callable[[Case, str], None] = lambda case, status: None,
              status: Callable[[str], None] = lambda message: None) -> BenchResult:
    """Measure the machine's limits, then every case of ``config``."""
    start = time.perf_counter()
    memory_limit = config.max_memory_bytes or total_memory_bytes() // 2
    status(tr("machine limits: matrix multiply and memory bandwidth"))
    # bf16 at half the size: where the CPU has no bf16 instructions it is emulated, many times slower
    matmul, matmul_bf16 = matmul_gflops(config.matmul_n), matmul_gflops(config.matmul_n // 2, dtype="bf16")
    bandwidth, read = memory_bandwidth(config.bandwidth_mib), read_bandwidth(config.bandwidth_mib)
    facts = machine_facts()
    cases = run_cases(config, memory_limit, progress)
    return BenchResult(config, facts.as_dict(), matmul.as_dict(), bandwidth.as_dict(), memory_limit, cases,
                       time.perf_counter() - start, read.as_dict(), matmul_bf16.as_dict())
