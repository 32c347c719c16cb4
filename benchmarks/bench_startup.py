"""How long ``attnlab sample`` takes to answer on a machine with nothing built, whether a sample killed part-way
leaves anything the next one waits on; and how many lines ``src/`` has, and what share of them is ``attnlab.fast``.

    .venv/bin/python benchmarks/bench_startup.py                    # writes benchmarks/results/startup.md
    .venv/bin/python benchmarks/bench_startup.py --base de041e5     # the base's tree measured beside this one
    .venv/bin/python benchmarks/bench_startup.py --quick --out /tmp/startup.md   # a smoke test

A. Start-up. For each tree, a tiny GPT is trained into a temporary directory (``attnlab train --preset tiny
   --max-iters 20``), then, with ``TORCH_EXTENSIONS_DIR`` at an empty temporary directory (attnlab's C++ kernels
   not built, as on a fresh machine or in a fresh container):

   1. ``attnlab sample --checkpoint RUN --max-new-tokens N --temperature 0``: the wall seconds until it exits;
   2. a sample of many more tokens, killed 6 s in (``timeout -s TERM 6``), as a user's Ctrl-C would;
   3. the first again, in the same cache directory: it must finish, in about the first's time.

   Every step has a timeout of its own (``--timeout``), so the run never hangs: a step that outlasts it is
   reported as not finished (a tree whose sample waits on something a killed one left waits that long, 600 s by
   default). Beside each step: the files left in the cache directory, and what the sample said of
   the kernels (its ``note:`` line). This tree builds the kernels only by ``attnlab kernels``; before the
   restructuring a sample built them on first use (``--base de041e5`` measures that tree the same way).
B. Lines. The lines of the ``.py`` and ``.cpp`` files under ``src/`` (all of them, and those not blank), and how
   many of them ``src/attnlab/fast/`` holds; with ``--base``, the base's ``src/`` too (``git archive``).

No figure here is a speed ratio: a start-up is seconds of wall time (imports, loading, the first tokens) and moves
with the machine's load, which the report gives.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "startup.md"
KILL_AFTER = 6  # seconds: the sample of step 2 is sent SIGTERM then
TOKENS, QUICK_TOKENS, KILLED_TOKENS = 200, 20, 100_000  # the killed one is still decoding at 6 s
SOURCES = (".py", ".cpp")
FAST = Path("attnlab") / "fast"  # under src/


# ---------------------------------------------------------------- A. start-up
@dataclass(frozen=True)
class Step:
    """One command of the start-up run, as it ended.

    Attributes:
        name: what the table calls it.
        seconds: wall seconds from its start to its end (or to its timeout).
        code: its exit code; None where it outlasted its timeout and was stopped.
        timeout: the seconds it was given.
        left: the files in the kernels' cache directory after it.
        note: what it said of the kernels (its stderr's ``note:`` line), or "".
    """

    name: str
    seconds: float
    code: int | None
    timeout: float
    left: int
    note: str

    @property
    def outcome(self) -> str:
        if self.code is None:
            return f"did not finish in {self.timeout:g} s"
        if self.code == 124:  # what `timeout` returns when it sent its signal
            return f"stopped by `timeout -s TERM {KILL_AFTER}`"
        return "exited 0" if self.code == 0 else f"exited {self.code}"


def files_in(directory: Path) -> int:
    """How many files ``directory`` holds, at any depth (0 where it does not exist)."""
    return sum(1 for p in directory.rglob("*") if p.is_file()) if directory.exists() else 0


def run_step(name: str, command: list[str], env: dict[str, str], timeout: float, cache: Path) -> Step:
    """Run ``command`` to its end or for ``timeout`` seconds at most (then stopped), timed by the wall clock."""
    start = time.perf_counter()
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
        code, stderr = done.returncode, done.stderr
    except subprocess.TimeoutExpired as stopped:
        code = None
        stderr = stopped.stderr.decode(errors="replace") if isinstance(stopped.stderr, bytes) else stopped.stderr or ""
    seconds = time.perf_counter() - start
    note = next((line.strip() for line in stderr.splitlines() if line.strip().startswith("note:")), "")
    if code not in (0, 124, None):  # a failure is shown, not hidden behind its exit code
        note = note or (stderr.strip().splitlines() or ["(no error output)"])[-1]
    return Step(name, seconds, code, timeout, files_in(cache), note)


def attnlab(*args: str) -> list[str]:
    """The command line of ``attnlab ARGS``; which tree's attnlab runs is the environment's (:func:`tree_env`)."""
    return [sys.executable, "-m", "attnlab", *args]


def tree_env(src: Path, cache: Path) -> dict[str, str]:
    """The environment of a command of the tree ``src``: its attnlab first, the kernels' cache at ``cache``."""
    return {**os.environ, "PYTHONPATH": str(src), "TORCH_EXTENSIONS_DIR": str(cache)}


def startup(src: Path, work: Path, tokens: int, timeout: float) -> list[Step]:
    """Part A's three steps for the tree ``src``, in ``work`` (a directory of its own)."""
    run, cache = work / "run", work / "kernels"
    cache.mkdir(parents=True)
    train = attnlab("train", "--preset", "tiny", "--max-iters", "20", "--eval-interval", "20", "--eval-iters", "2",
                    "--device", "cpu", "--out", str(run))
    trained = run_step("train the tiny GPT", train, tree_env(src, work / "training-kernels"), timeout, cache)
    if trained.code != 0:
        raise SystemExit(f"attnlab train failed in {src}: {trained.note}")
    env = tree_env(src, cache)

    def sample(n: int) -> list[str]:
        return attnlab("sample", "--checkpoint", str(run), "--max-new-tokens", str(n), "--temperature", "0",
                       "--device", "cpu")

    return [run_step(f"sample {tokens} tokens, nothing built", sample(tokens), env, timeout, cache),
            run_step(f"a sample killed {KILL_AFTER} s in", ["timeout", "-s", "TERM", str(KILL_AFTER),
                                                            *sample(KILLED_TOKENS)], env, timeout, cache),
            run_step(f"sample {tokens} tokens after the kill", sample(tokens), env, timeout, cache)]


# ---------------------------------------------------------------- B. lines
@dataclass(frozen=True)
class Lines:
    """The source lines of a ``src/`` directory."""

    files: int
    lines: int
    nonblank: int
    fast: int  # lines of src/attnlab/fast/
    fast_nonblank: int


def count_lines(src: Path) -> Lines:
    """The lines of the :data:`SOURCES` files under ``src``, and of those under ``src/attnlab/fast``."""
    files = lines = nonblank = fast = fast_nonblank = 0
    for path in sorted(src.rglob("*")):
        if path.suffix not in SOURCES or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8").splitlines()
        full, filled = len(text), sum(1 for line in text if line.strip())
        files, lines, nonblank = files + 1, lines + full, nonblank + filled
        if path.relative_to(src).is_relative_to(FAST):
            fast, fast_nonblank = fast + full, fast_nonblank + filled
    return Lines(files, lines, nonblank, fast, fast_nonblank)


def base_src(base: str, into: Path) -> Path:
    """The base revision's ``src/``, unpacked from git into ``into``."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", base, "src"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "src"


# ---------------------------------------------------------------- the report
def report(steps: dict[str, list[Step]], lines: dict[str, Lines], command: str, facts: str,
           load: tuple[float, ...], quick: bool) -> str:
    """startup.md: part A's steps and part B's lines, for each tree (this one first)."""
    out = ["# Start-up of `attnlab sample`, and the lines of src/" + (" (--quick: a smoke test)" if quick else ""),
           "", facts, f"Load average at the start (1, 5, 15 min): {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}.", "",
           f"Command: `{command}`.", ""]
    if steps:
        out += ["## A. `attnlab sample` on a machine with nothing built", "",
                "A tiny GPT (`attnlab train --preset tiny --max-iters 20`), sampled greedily on the CPU with "
                "`TORCH_EXTENSIONS_DIR` at an empty directory: wall seconds to exit; then a sample killed "
                f"{KILL_AFTER} s in (`timeout -s TERM {KILL_AFTER}`), then the first sample again in the same "
                "directory. \"cache files\": the files in that directory after the step.", "",
                "| tree | step | wall s | outcome | cache files | what it said of the kernels |",
                "|---|---|---|---|---|---|"]
        for tree, rows in steps.items():
            out += [f"| {tree} | {s.name} | {s.seconds:.1f} | {s.outcome} | {s.left} | {s.note or '–'} |"
                    for s in rows]
        out.append("")
    out += ["## B. Lines of src/", "",
            "Every `.py` and `.cpp` file under `src/`; \"non-blank\": the lines with something on them.", "",
            "| tree | files | lines | non-blank | src/attnlab/fast/ lines | non-blank | share of the lines |",
            "|---|---|---|---|---|---|---|"]
    for tree, n in lines.items():
        share = 100 * n.fast / n.lines if n.lines else 0.0
        out.append(f"| {tree} | {n.files:,} | {n.lines:,} | {n.nonblank:,} | {n.fast:,} | {n.fast_nonblank:,} | "
                   f"{share:.1f} % |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default=None, help="a git revision to measure beside this tree (de041e5: before "
                                                     "the restructuring into attnlab.fast)")
    parser.add_argument("--quick", action="store_true", help=f"a smoke test: samples of {QUICK_TOKENS} tokens")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds any one step may take [600]")
    parser.add_argument("--lines-only", action="store_true", help="part B alone (no sampling)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="the report [benchmarks/results/startup.md]")
    args = parser.parse_args(argv)
    if args.timeout <= KILL_AFTER:
        parser.error(f"--timeout: must be more than the {KILL_AFTER} s after which step 2 is killed, got "
                     f"{args.timeout:g}")
    from attnlab.bench.machine import machine_facts
    from attnlab.files import atomic_write_text

    load = os.getloadavg()
    tokens = QUICK_TOKENS if args.quick else TOKENS
    steps: dict[str, list[Step]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"this tree": ROOT / "src"}
        if args.base is not None:
            (Path(tmp) / "base").mkdir()
            trees[args.base] = base_src(args.base, Path(tmp) / "base")
        lines = {tree: count_lines(src) for tree, src in trees.items()}
        if not args.lines_only:
            for i, (tree, src) in enumerate(trees.items()):
                steps[tree] = startup(src, Path(tmp) / f"tree-{i}", tokens, args.timeout)
                for s in steps[tree]:
                    print(f"{tree}: {s.name}: {s.seconds:.1f} s, {s.outcome}, {s.left} cache files; {s.note}",
                          flush=True)
    command = " ".join(["python benchmarks/bench_startup.py", *(argv if argv is not None else sys.argv[1:])])
    atomic_write_text(args.out, report(steps, lines, command, machine_facts().summary(), load, args.quick))
    print(f"wrote {args.out}")
    return args.out


if __name__ == "__main__":
    main()
