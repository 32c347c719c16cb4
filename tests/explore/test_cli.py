"""``attnlab explore`` on the command line: models loaded (and refused) before anything is served, the URL with its
token, a port in use named, ``--host 0.0.0.0`` warned about, Ctrl-C, and ``--export``'s snapshot."""

import html
import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

from attnlab.cli import main
from tiny_runs import TEXT, TINY, run

ROOT = Path(__file__).resolve().parents[2]
BOOT = re.compile(r'<script type="application/json" id="attnlab-boot">(.*?)</script>', re.S)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A tiny trained GPT and a tiny translation model."""
    root = tmp_path_factory.mktemp("runs")
    (root / "romeo.txt").write_text(TEXT, encoding="utf-8")
    assert run("train", "--data", root / "romeo.txt", "--out", root / "gpt", *TINY, "--max-iters", 4).exit_code == 0
    s2s = ["--d-model", "16", "--num-heads", "2", "--num-encoder-layers", "1", "--num-decoder-layers", "1",
           "--d-ff", "32", "--context-length", "24", "--batch-size", "4", "--steps", "2", "--eval-interval", "2",
           "--eval-iters", "1", "--train-pairs", "50", "--val-pairs", "10", "-q"]
    assert run("train-seq2seq", "--task", "numbers", "--out", root / "s2s", *s2s).exit_code == 0
    return root


def boot_of(page: Path) -> dict:
    return json.loads(BOOT.search(page.read_text(encoding="utf-8")).group(1))


def test_export_writes_one_page_holding_each_models_reading(runs, tmp_path):
    out = tmp_path / "snap"
    result = CliRunner().invoke(main, ["explore", "--checkpoint", str(runs / "gpt"), "--checkpoint",
                                       str(runs / "s2s"), "--text", "ROMEO: But", "--export", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"wrote {out / 'index.html'}"
    boot = boot_of(out / "index.html")
    assert [(m["name"], m["kind"]) for m in boot["models"]] == [("gpt", "decoder"), ("s2s", "seq2seq")]
    held = {m["name"]: m for m in boot["snapshot"]["models"]}
    assert held["gpt"]["forward"]["base"]["tokens"] == list("ROMEO: But")
    assert held["s2s"]["describe"]["target"] != "" and set(held["s2s"]["forward"]["full"]) == {"encoder", "decoder",
                                                                                               "cross"}
    assert "connect-src 'none'" in html.unescape((out / "index.html").read_text(encoding="utf-8"))
    assert "token" not in boot  # a snapshot carries no launch token


def test_a_checkpoint_that_does_not_load_is_named_before_anything_is_served(tmp_path):
    (tmp_path / "empty").mkdir()
    result = CliRunner().invoke(main, ["explore", "--checkpoint", str(tmp_path / "empty"), "--no-browser"])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1 and "Traceback" not in result.output
    assert lines[0].startswith("Error:") and "empty: cannot be explored" in lines[0] and "no checkpoint" in lines[0]


def test_a_port_in_use_is_named(runs):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = CliRunner().invoke(main, ["explore", "--checkpoint", str(runs / "gpt"), "--port", str(port),
                                           "--no-browser"])
    assert result.exit_code == 1 and f"port {port} is in use on 127.0.0.1" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_options_that_do_nothing_with_export_are_refused(runs, tmp_path):
    result = CliRunner().invoke(main, ["explore", "--checkpoint", str(runs / "gpt"), "--export", str(tmp_path / "x"),
                                       "--port", "9000"])
    assert result.exit_code == 2 and "--port 9000 does nothing with --export" in result.output
    assert not (tmp_path / "x").exists()


def test_it_serves_until_ctrl_c_warning_when_every_address_may_use_it(runs):
    """A real process on a free port: the warning, the URL and its token, the API answering that Host alone,
    then Ctrl-C: exit 130 and ``Interrupted.``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "ATTNLAB_LANG": "en"}
    proc = subprocess.Popen([sys.executable, "-m", "attnlab", "explore", "--checkpoint", str(runs / "gpt"),
                             "--host", "0.0.0.0", "--port", "0", "--no-browser"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        warning = proc.stderr.readline()
        line = proc.stdout.readline()  # printed once the server answers
        url = re.search(r"http://\S+", line).group(0)
        assert "0.0.0.0" in warning and "every machine" in warning
        assert url.startswith("http://127.0.0.1:") and "?token=" in url
        base, token = url.split("/?token=")
        with urllib.request.urlopen(f"{base}/api/models?token={token}", timeout=60) as answer:
            assert [m["name"] for m in json.loads(answer.read())] == ["gpt"]
        rebound = urllib.request.Request(f"{base}/api/models?token={token}", headers={"Host": "evil.example"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(rebound, timeout=60)
        assert refused.value.code == 403
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and err.strip().endswith("Interrupted.") and "Traceback" not in err


def test_a_hugging_face_directory_is_explored(tmp_path):
    pytest.importorskip("transformers")
    from hf_checkpoints import write_checkpoint

    write_checkpoint("gpt2", tmp_path / "gpt2")
    result = CliRunner().invoke(main, ["explore", "--model-dir", str(tmp_path / "gpt2"), "--text", "Hello there",
                                       "--export", str(tmp_path / "snap")])
    assert result.exit_code == 0, result.output
    held = boot_of(tmp_path / "snap" / "index.html")["snapshot"]["models"][0]
    assert held["describe"]["kind"] == "decoder" and "".join(held["forward"]["base"]["tokens"]) == "Hello there"
