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
