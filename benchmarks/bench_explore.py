"""How fast the explorer answers: from a keystroke to the redrawn view, and 20 clients at once.

    .venv/bin/python benchmarks/bench_explore.py           # both parts (≈ 5 minutes on 2 cores)
    .venv/bin/python benchmarks/bench_explore.py --quick   # a smoke test: few keystrokes, a short load

A. **Keystroke to redrawn view**, in Chromium (Debian's, driven by Playwright) against the real server: the page
   records, for each keystroke, the time from the ``input`` event to the animation frame after the view that answers
   it is drawn (the overview of every layer × head, the selected head's matrix, the next token); the benchmark types
   a letter over the last one of a text of 16, 64 and 512 tokens, waits for each view, and reads those times: p50
   and p95, in the quietest of three interleaved rounds. Models: the demo's GPT (``out/shakespeare`` if ``attnlab
   demo`` trained it, else a random GPT of its size, the baby preset over Shakespeare's characters; 64 positions, so
   at 512 tokens it reads the last 64) and the shipped all-MiniLM-L6-v2 (6 × 12 heads; 512 tokens is its whole
   window).
B. **20 clients at once for 30 s** on 127.0.0.1: a server in its own process, 20 clients each sending the page's
   request (``/api/forward`` with ``encoding: base64``, one head's detail, the overview) for a new text of 64 tokens
   as soon as the last answer came, for 30 s; the errors (any status but 200) and the latency p50 / p95 / max held.

Writes ``benchmarks/results/explore.md`` (``--out``: elsewhere).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "explore.md"
DEMO_RUN = ROOT / "out" / "shakespeare"
SIZES = (16, 64, 512)
VERSE = ("ROMEO:\nBut, soft! what light through yonder window breaks?\nIt is the east, and Juliet is the sun.\n"
         "Arise, fair sun, and kill the envious moon,\nWho is already sick and pale with grief,\n")
WORDS = ["the", "cat", "sat", "on", "a", "mat", "and", "it", "was", "warm", "so", "she", "slept", "there", "all",
         "day", "long"]
TOKEN = "bench"
ROUNDS = 3  # every case in each, interleaved
KEYSTROKES = 20  # a case's keystrokes in a round


def demo_gpt():
    """The demo's GPT and its tokenizer, and what it is."""
    from attnlab.data.tokenizer import CharTokenizer
    from attnlab.models import GPT, GPTConfig
    from attnlab.models.checkpoint import load_trained

    if (DEMO_RUN / "checkpoint.json").is_file():
        model, tokenizer = load_trained(DEMO_RUN)
        return model, tokenizer, f"the demo's GPT ({DEMO_RUN.relative_to(ROOT)})"
    import torch

    torch.manual_seed(0)
    tokenizer = CharTokenizer.train(VERSE + "".join(map(chr, range(32, 127))))
    model = GPT(GPTConfig.from_preset("baby", vocab_size=tokenizer.vocab_size)).eval()
    return model, tokenizer, "a random GPT of the demo's size (baby preset: 4 layers × 4 heads, 64 positions)"


def texts(tokenizer, n: int, words: bool) -> str:
    """A text of ``n`` tokens (MiniLM's [CLS] and [SEP] counted) ending in a letter, which the keystrokes replace."""
    if not words:
        return (VERSE * (n // len(VERSE) + 1))[: n - 1] + "a"
    text = " ".join((WORDS * (n // len(WORDS) + 1))[: n - 3]) + " a"
    assert len(tokenizer.encode(text).ids) == n, "every word one token"
    return text


def entries():
    from attnlab.explore.entry import entry_for
    from attnlab.pretrained import load_bert

    model, tokenizer, what = demo_gpt()
    return [entry_for(model, tokenizer, "gpt"), entry_for(load_bert(), name="minilm")], what


def serve(entries_):
    """The explorer over ``entries_`` on 127.0.0.1, from a thread of this process: ``(base URL, stop)``."""
    from attnlab.explore.api import Api
    from attnlab.explore.launch import local_server

    return local_server(Api(entries_), TOKEN)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def keystrokes(page, model: str, text: str, count: int) -> list[float]:
    """Milliseconds from each of ``count`` keystrokes to the view that answers it. Each keystroke types a letter
    over the text's last one (the same number of tokens, a text the server has not just read: its readings are
    kept, and a text met again would not be read again)."""
    done = "([t, n]) => { const r = document.querySelector('[data-testid=explorer]'); " \
           "return r.dataset.text === t && (window.attnlabTimings || []).length >= n; }"
    page.select_option("[data-testid=model-select]", model)
    page.fill("[data-testid=text-input]", text)
    page.wait_for_function(done, arg=[text, 0], timeout=300_000)
    page.evaluate("() => { window.attnlabTimings = []; }")
    page.focus("[data-testid=text-input]")
    page.keyboard.press("Control+End")
    for i in range(count + 3):  # 3 to warm up
        letter = "bcdefghijklmnopqrstuvwxyz"[i % 25]
        page.keyboard.press("Shift+ArrowLeft")
        page.keyboard.type(letter)
        page.wait_for_function(done, arg=[text[:-1] + letter, i + 1], timeout=300_000)
    return page.evaluate("() => window.attnlabTimings")[3:]


def part_a(quick: bool) -> tuple[list[str], str]:
    """Every case in each of :data:`ROUNDS` rounds, interleaved; per case the quietest round (the lowest p95) and
    the p95 of every round: on a shared machine the slower rounds measure the neighbours."""
    from playwright.sync_api import sync_playwright

    found, what = entries()
    cases = [(entry, n) for entry in found for n in SIZES]
    rounds: dict[tuple[str, int], list[tuple[list[float], list[float], float]]] = {}
    base, stop = serve(found)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium",
                                        args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            page.goto(f"{base}/?token={TOKEN}")
            page.wait_for_selector("[data-testid=explorer][data-state=ready]", state="attached", timeout=300_000)
            for r in range(1 if quick else ROUNDS):
                for entry, n in cases:
                    load = os.getloadavg()[0]
                    timed = keystrokes(page, entry.name, texts(entry.tokenizer, n, entry.kind == "encoder"),
                                       6 if quick else KEYSTROKES)
                    rounds.setdefault((entry.name, n), []).append(
                        ([t["ms"] for t in timed], [t["answer"] for t in timed], load))
                    p95 = percentile(rounds[entry.name, n][-1][0], 0.95)
                    print(f"round {r}: {entry.name} at {n} tokens, p95 {p95:.0f} ms (load {load:.1f})", flush=True)
            browser.close()
    finally:
        stop()
    rows = []
    for entry, n in cases:
        measured = rounds[entry.name, n]
        times, waits, load = min(measured, key=lambda m: percentile(m[0], 0.95))
        every = ", ".join(f"{percentile(m[0], 0.95):.0f}" for m in measured)
        rows.append(f"| {entry.name} | {n} | {min(n, entry.window)} | {len(times)} | {statistics.median(times):.0f} | "
                    f"{percentile(times, 0.95):.0f} | {max(times):.0f} | {statistics.median(waits):.0f} | {load:.1f} | "
                    f"{every} |")
    return rows, what


async def clients(base: str, n_clients: int, seconds: float, text: str) -> tuple[list[float], int, int]:
    import httpx

    latencies, errors, sent = [], 0, 0
    end = time.perf_counter() + seconds

    async def one(k: int, client: httpx.AsyncClient) -> None:
        nonlocal errors, sent
        i = 0
        while time.perf_counter() < end:
            i += 1
            count = k * 1000 + i  # a text no client sent before: the server reads each one
            tail = "".join("abcdefghijklmnopqrstuvwxyz"[count // 26**p % 26] for p in range(3))
            body = {"model": "gpt", "text": text[:-3] + tail, "encoding": "base64",
                    "detail": {"layer": k % 4, "head": i % 4}, "overview": 32}
            start = time.perf_counter()
            answer = await client.post(f"{base}/api/forward?token={TOKEN}", json=body)
            latencies.append(1000 * (time.perf_counter() - start))
            sent += 1
            errors += answer.status_code != 200

    limits = httpx.Limits(max_connections=n_clients)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        await asyncio.gather(*(one(k, client) for k in range(n_clients)))
    return latencies, errors, sent


def part_b(quick: bool) -> list[str]:
    """The server in a process of its own (this one runs the clients), then 20 clients."""
    seconds = 5.0 if quick else 30.0
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen([sys.executable, __file__, "--serve"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        base = proc.stdout.readline().strip()
        from attnlab.data.tokenizer import CharTokenizer

        text = texts(CharTokenizer.train(VERSE), 64, words=False)
        latencies, errors, sent = asyncio.run(clients(base, 20, seconds, text))
    finally:
        proc.terminate()
        proc.wait(30)
    return [f"| 20 | {seconds:.0f} | {sent} | {errors} | {sent / seconds:.1f} | {statistics.median(latencies):.0f} | "
            f"{percentile(latencies, 0.95):.0f} | {max(latencies):.0f} |"]


def serve_forever() -> None:
    """``--serve``: the demo's GPT served on a free port of 127.0.0.1 until terminated; prints its base URL."""
    from attnlab.explore.entry import entry_for

    model, tokenizer, _ = demo_gpt()
    base, _ = serve([entry_for(model, tokenizer, "gpt")])
    print(base, flush=True)
    threading.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="few keystrokes, a 5-second load: a smoke test")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the tables go")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve_forever()
    from attnlab.bench.machine import machine_facts
    from attnlab.files import atomic_write_text

    load_before = os.getloadavg()[0]
    rows, what = part_a(args.quick)
    load = [os.getloadavg()[0]]
    concurrent = part_b(args.quick)
    load.append(os.getloadavg()[0])
    page = ["# The explorer's speed" + (" (--quick: a smoke test, not a measurement)" if args.quick else ""), "",
            machine_facts().summary(), "",
            f"Command: `{' '.join(['benchmarks/bench_explore.py', *sys.argv[1:]])}`. The machine's load average "
            f"(1 min) before, between and after the parts: {load_before:.1f}, {load[0]:.1f}, {load[1]:.1f} (2 cores, "
            "shared: every figure is the page's time on this machine as it was). The explorer's API runs torch on "
            "one thread (docs/explore.md).", "",
            "## A. Keystroke to redrawn view (Chromium, 1280 × 720)", "",
            f"GPT: {what}. MiniLM: all-MiniLM-L6-v2. Each keystroke types a letter over the text's last one; the "
            "time from the input event to the frame after the page drew the overview of every head, the selected "
            "head's matrix and the next token; of it, the time until the server's answer had arrived (the rest is "
            f"the page: decoding and drawing). {ROUNDS} rounds of {KEYSTROKES} keystrokes a case, the cases "
            "interleaved; each row is a case's quietest round (its lowest p95: the slower rounds measure the "
            "neighbours), with the load average as it began and the p95 of every round. Target: p95 ≤ 150 ms at "
            "64 tokens.", "",
            "| model | tokens typed | tokens read | keystrokes | p50 ms | p95 ms | max ms | answer part: p50 ms | load "
            "| p95 of each round |",
            "|---|---|---|---|---|---|---|---|---|---|",
            *rows, "", "## B. 20 clients at once on 127.0.0.1", "",
            "The server in its own process (the demo's GPT, one request computed at a time, at most 64 waiting), 20 "
            "clients each sending the page's request for a new 64-token text as soon as its last answer came.", "",
            "| clients | seconds | requests | errors | requests/s | p50 ms | p95 ms | max ms |",
            "|---|---|---|---|---|---|---|---|", *concurrent, ""]
    atomic_write_text(args.out, "\n".join(page))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
