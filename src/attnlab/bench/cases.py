"""What ``attnlab bench`` measures: the cases, the run's settings, and the plan for each case
(how many repeats, or why it is skipped) made *before* it runs, from estimates of its memory and time."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from attnlab.bench.flops import attention_flops
from attnlab.functional.backends import KERNELS
from attnlab.i18n import N_, tr
from attnlab.numpy.checks import BACKENDS as TWIN_BACKENDS

TORCH_BACKENDS = (*KERNELS, "auto")  # attnlab.functional's: the table in functional/backends.py, then its rule
NUMPY_BACKENDS = tuple(f"numpy-{b}" for b in TWIN_BACKENDS if b != "auto")  # attnlab.numpy's
#: what ``attnlab bench`` can measure
BACKENDS = TORCH_BACKENDS + NUMPY_BACKENDS

TEXTS_SHAPE = {"batch": 8, "seq_len": 256, "d_model": 512, "num_heads": 8}  # the texts' example
FULL_SEQ_LENS = (256, 1024, 4096, 16384, 65536)
QUICK_SEQ_LENS = (256, 1024)

# Rough rates (GFLOP/s, full T² count) used only to plan a case before anything is measured (the torch backends':
# their rows of KERNELS); after the first measurement of a backend, its own measured rate takes over.
_TWIN_GFLOPS = {"numpy-math": 30.0, "numpy-chunked": 40.0}
# The O(T²) paths fault in a fresh score matrix on the first call; pages arrive at about this rate.
_FAULT_BYTES_PER_S = 0.5e9


@dataclass(frozen=True)
class Case:
    """One measurement: multi-head self-attention forward, ``(B, T, d)`` in, with one backend."""

    group: str  # "texts" (the texts' shape) or "sweep" (T varies)
    backend: str
    batch: int
    seq_len: int
    d_model: int
    num_heads: int
    is_causal: bool

    def flops(self) -> int:
        return attention_flops(self.batch, self.seq_len, self.d_model, self.num_heads, self.is_causal).total

    def full_flops(self) -> int:
        """FLOPs with every query-key pair counted: what the O(T²) kernels really compute, used for planning."""
        return attention_flops(self.batch, self.seq_len, self.d_model, self.num_heads, False).total

    def as_dict(self) -> dict:
        return asdict(self)


def estimate_peak_bytes(case: Case) -> int:
    """Peak extra memory of one call, estimated from what each backend allocates (its ``memory`` in
    :data:`~attnlab.functional.backends.KERNELS`; ``"auto"`` runs a fused kernel at these lengths).

    ``math`` (torch) holds the scores and the softmax output at once (two ``(B, h, T, T)`` fp32
    matrices) and, when is_causal, bool masks of ``T²`` bytes; ``numpy-math`` works in place (one
    matrix, the causal mask written into it). The chunked kernels hold a few blocks of scores;
    ``sdpa`` (a flash kernel) is O(T).
    """
    b, t, d, h = case.batch, case.seq_len, case.d_model, case.num_heads
    activations = 8 * b * t * d * 4  # x, q, k, v, their head-split copies, the concatenated heads, the output
    scores = b * h * t * t * 4
    masks = 2 * t * t if case.is_causal else 0
    twin = {"numpy-math": scores, "numpy-chunked": 4 * b * h * 512 * 1024 * 4}
    if case.backend in twin:
        return activations + twin[case.backend]
    kernel = KERNELS.get(case.backend)
    memory = "rows" if kernel is None else kernel.memory
    held = {"scores": 2 * scores + masks, "blocks": 4 * b * h * 256 * 512 * 4, "rows": 2 * b * h * t * 4}[memory]
    return activations + held


def prior_gflops(name: str) -> float:
    """The rate a case is planned with before the backend ``name`` has been measured."""
    if name in _TWIN_GFLOPS:
        return _TWIN_GFLOPS[name]
    return KERNELS[name].cpu_gflops if name in KERNELS else KERNELS["sdpa"].cpu_gflops  # auto: fused


def available_backends() -> tuple[str, ...]:
    """The backends ``attnlab bench`` measures by default: those that compute on a CPU, where it measures."""
    return tuple(b for b in BACKENDS if unavailable(b) is None)


#: why a case is not measured: English in the results (data, as ``--json`` prints them), shown in the reader's
#: language by :func:`attnlab.i18n.made_from` (their fields are strings, formatted where the reason is made)
ON_A_GPU = N_("{backend} runs on a GPU (on a CPU only under Triton's interpreter): benchmarks/bench_gpu.py times it")
TOO_MUCH_MEMORY = N_("memory ~{need} GiB > {limit} GiB limit")
TOO_LONG = N_("time ~{need} s > {limit} s budget")
TOO_LONG_FOR_THE_RUN = N_("time ~{need} s > the {left} s left of the run's budget")
SKIPPED = (ON_A_GPU, TOO_MUCH_MEMORY, TOO_LONG, TOO_LONG_FOR_THE_RUN)


def unavailable(backend: str) -> str | None:
    """None if ``backend`` computes on a CPU, else why it is not measured here."""
    kernel = KERNELS.get(backend)
    if kernel is None or kernel.cpu:
        return None
    return ON_A_GPU.format(backend=backend)


@dataclass
class BenchConfig:
    """How much to measure. ``quick()`` and ``full()`` are the two presets."""

    seq_lens: tuple[int, ...] = FULL_SEQ_LENS
    backends: tuple[str, ...] = field(default_factory=available_backends)
    is_causal: tuple[bool, ...] = (False, True)
    texts_shape: bool = True
    batch: int = 1  # the sweep's batch, width and heads
    d_model: int = 512
    num_heads: int = 8
    target_seconds: float = 1.0  # timed repeats per case aim at about this much time...
    min_repeats: int = 3
    max_repeats: int = 25
    long_call_seconds: float = 5.0  # ...but a call longer than this is timed once, on its first run
    max_case_seconds: float = 60.0  # skip a case predicted to take longer than this
    max_total_seconds: float = 420.0  # and any case predicted to overrun the whole run's budget
    max_memory_bytes: int = 0  # skip a case predicted to need more; 0 = half the machine's memory
    matmul_n: int = 4096
    bandwidth_mib: int = 512
    seed: int = 0
    is_quick: bool = False  # made by quick(): only recorded, so the report can name the command

    def __post_init__(self) -> None:
        if not self.seq_lens or any(isinstance(t, bool) or not isinstance(t, int) or t < 1 for t in self.seq_lens):
            raise ValueError(tr("seq_lens must be positive integers, got {seq_lens!r}", seq_lens=self.seq_lens))
        unknown = [b for b in self.backends if b not in BACKENDS]
        if not self.backends or unknown:
            raise ValueError(tr("unknown backend(s) {names}; valid: {backends}", names=unknown or '(none given)',
                                backends=', '.join(BACKENDS)))
        if not self.is_causal:
            raise ValueError(tr("is_causal must hold at least one of False, True"))
        for name in ("batch", "d_model", "num_heads", "min_repeats", "max_repeats", "matmul_n", "bandwidth_mib"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(tr("{name} must be a positive int, got {value!r}", name=name, value=value))
        if self.d_model % self.num_heads:
            raise ValueError(tr("num_heads={num_heads} must divide d_model={d_model}", num_heads=self.num_heads,
                                d_model=self.d_model))
        if self.min_repeats > self.max_repeats:
            raise ValueError(tr("min_repeats={min_repeats} must not exceed max_repeats={max_repeats}",
                                min_repeats=self.min_repeats, max_repeats=self.max_repeats))
        for name in ("target_seconds", "long_call_seconds", "max_case_seconds", "max_total_seconds"):
            if not getattr(self, name) > 0:
                raise ValueError(tr("{name} must be > 0, got {value!r}", name=name, value=getattr(self, name)))

    @classmethod
    def quick(cls, **overrides) -> BenchConfig:
        settings = {"is_quick": True, "seq_lens": QUICK_SEQ_LENS, "target_seconds": 0.1, "min_repeats": 2,
                    "max_repeats": 5, "max_case_seconds": 5.0, "max_total_seconds": 45.0, "matmul_n": 2048,
                    "bandwidth_mib": 128}
        return cls(**{**settings, **overrides})

    @classmethod
    def full(cls, **overrides) -> BenchConfig:
        return cls(**overrides)

    def cases(self) -> list[Case]:
        """Every case, in the order of the table: the texts' shape, then the sweep by T, is_causal, backend."""
        found = []
        if self.texts_shape:
            found += [Case("texts", b, is_causal=c, **TEXTS_SHAPE) for c in self.is_causal for b in self.backends]
        for t in sorted(set(self.seq_lens)):
            found += [Case("sweep", b, self.batch, t, self.d_model, self.num_heads, c)
                      for c in self.is_causal for b in self.backends]
        return found

    def run_order(self) -> list[Case]:
        """The order to run them: the texts' shape, then the sweep by increasing T, each backend planned
        from its previous T; the O(T²)-memory math paths last, so that if the run's time budget runs
        out it is spent on what fits at long T, not on the math paths' slowest cases."""
        cases = self.cases()
        return ([c for c in cases if c.group == "texts"]
                + [c for c in cases if c.group == "sweep" and not c.backend.endswith("math")]
                + [c for c in cases if c.group == "sweep" and c.backend.endswith("math")])


def _secs(s: float) -> str:
    return f"{s:.1f}" if s < 10 else f"{s:.0f}"


@dataclass(frozen=True)
class Plan:
    """What to do with a case: run it, or skip it (``skip`` says why).

    A run is a first call (it measures memory), ``warmup`` untimed calls, then ``repeats`` timed
    calls; with ``single_call`` the first call is also the only timed one.
    """

    repeats: int = 0
    warmup: int = 1
    single_call: bool = False
    est_seconds: float = 0.0  # estimated time of one call
    est_total: float = 0.0  # estimated time of the whole case
    est_bytes: int = 0
    skip: str | None = None


class Planner:
    """Plans each case from estimates, and learns each backend's rate from what it measured."""

    def __init__(self, config: BenchConfig, memory_limit: int) -> None:
        self.config, self.memory_limit = config, memory_limit
        self.rate: dict[tuple[str, bool], float] = {}  # (backend, causal) -> measured full-count FLOP/s

    def learn(self, case: Case, median_seconds: float) -> None:
        self.rate[(case.backend, case.is_causal)] = case.full_flops() / median_seconds

    def plan(self, case: Case, seconds_left: float = float("inf")) -> Plan:
        """How to run ``case``; ``seconds_left``: what remains of the whole run's time budget."""
        cfg = self.config
        est_bytes = estimate_peak_bytes(case)
        cannot = unavailable(case.backend)
        if cannot is not None:
            return Plan(skip=cannot)
        rate = self.rate.get((case.backend, case.is_causal), prior_gflops(case.backend) * 1e9)
        per_call = case.full_flops() / rate
        if est_bytes > self.memory_limit:
            return Plan(est_seconds=per_call, est_bytes=est_bytes,
                        skip=TOO_MUCH_MEMORY.format(need=f"{est_bytes / 2**30:.1f}",
                                                    limit=f"{self.memory_limit / 2**30:.1f}"))
        quadratic = case.backend.endswith("math")  # O(T²) memory: a first call slowed by fresh page faults
        first_call = per_call + (est_bytes / _FAULT_BYTES_PER_S if quadratic else 0.0)
        if per_call >= cfg.long_call_seconds and not quadratic:
            repeats, warmup, single, total = 1, 0, True, first_call  # the first call's time is representative
        elif per_call >= cfg.long_call_seconds:
            repeats, warmup, single, total = 1, 0, False, first_call + per_call  # the first call warmed up
        else:
            repeats = int(min(cfg.max_repeats, max(cfg.min_repeats, round(cfg.target_seconds / per_call))))
            warmup, single, total = 1, False, first_call + (repeats + 1) * per_call
        if total > cfg.max_case_seconds:
            return Plan(est_seconds=per_call, est_total=total, est_bytes=est_bytes,
                        skip=TOO_LONG.format(need=_secs(total), limit=f"{cfg.max_case_seconds:.0f}"))
        if total > seconds_left:
            return Plan(est_seconds=per_call, est_total=total, est_bytes=est_bytes,
                        skip=TOO_LONG_FOR_THE_RUN.format(need=_secs(total), left=_secs(max(seconds_left, 0))))
        return Plan(repeats, warmup, single, per_call, total, est_bytes)
