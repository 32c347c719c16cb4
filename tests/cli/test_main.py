import io

from click.testing import CliRunner
from rich.console import Console

import attnlab
from attnlab.cli import main
from attnlab.demo import Demo
from attnlab.demo.mechanisms import mechanisms_step


def test_help_lists_commands():
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    assert "demo" in result.output


def test_version():
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"attnlab, version {attnlab.__version__}"


def test_unknown_command_is_an_error():
    result = CliRunner().invoke(main, ["nope"])
    assert result.exit_code == 2 and "No such command 'nope'" in result.output


def test_demo_walks_through_the_four_mechanisms():
    buf = io.StringIO()
    mechanisms_step(Demo(Console(file=buf, width=200)))
    text = buf.getvalue()
    for heading in ("1. Simplified", "2. Scaled", "3. Causal", "4. Multi-head"):
        assert heading in text
    assert "0.4419" in text and "0.6515" in text  # the book's context vector for "journey"
    assert "-inf" in text  # the causal mask is shown


def test_python_dash_m_runs_the_same_command_line():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "attnlab", "--version"], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stdout.strip() == f"attnlab, version {attnlab.__version__}"


def test_an_unwritable_output_names_the_file_not_a_temporary(tmp_path):
    result = CliRunner().invoke(main, ["pe-plot", "-o", "/proc/attnlab-test.png"])
    assert result.exit_code == 1
    assert "cannot write '/proc/attnlab-test.png'" in result.output and ".tmp" not in result.output
    assert "Traceback" not in result.output


def test_a_binary_corpus_says_which_file_and_what_to_do(tmp_path):
    binary = tmp_path / "data.bin"
    binary.write_bytes(b"abc\xd0\xd1")
    result = CliRunner().invoke(main, ["train", "--data", str(binary), "--out", str(tmp_path / "o"), "-q"])
    assert result.exit_code == 1
    assert f"data: '{binary}' is not UTF-8 text (byte 0xd0 at offset 3); give a UTF-8 text file" in result.output


def test_an_unexpected_error_is_one_line(monkeypatch):
    def broken(*args, **kwargs):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr("attnlab.viz.pe_plot.pe_figure", broken)  # pe-plot imports it when it runs
    result = CliRunner().invoke(main, ["pe-plot", "-o", "x.png"])
    assert result.exit_code == 1 and "internal error (ZeroDivisionError: boom)" in result.output
