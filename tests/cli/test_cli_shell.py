"""Shell conventions (issue 39): ``-h`` is ``--help`` on every command, a flag's help shows no ``<bool>`` value (it
takes none), and typer's shell completion answers (README: ``rankkit --install-completion``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from rankkit.cli import click_command

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = sorted(click_command().commands)


@pytest.mark.parametrize("command", COMMANDS)
def test_h_is_help_and_flags_show_no_bool(cli: Callable[..., Any], command: str) -> None:
    short, long = cli(command, "-h"), cli(command, "--help")
    assert short.code == 0 == long.code and short.stdout == long.stdout and "Usage: rankkit" in short.stdout
    assert "<bool>" not in short.stdout
    assert "-h" in long.stdout  # listed beside --help


def test_the_top_level_h(cli: Callable[..., Any]) -> None:
    short, long = cli("-h"), cli("--help")
    assert short.code == 0 and short.stdout == long.stdout and "Usage: rankkit [OPTIONS] COMMAND" in short.stdout
    assert "<bool>" not in short.stdout and "--install-completion" in short.stdout


def complete(words: str) -> list[str]:
    """What bash completion offers after ``words`` (typer's protocol, as the script --install-completion installs)."""
    env = {**os.environ, "_RANKKIT_COMPLETE": "complete_bash", "COMP_WORDS": words,
           "COMP_CWORD": str(len(words.split()) - 1),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", "from rankkit.cli import main; main()"], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_shell_completion_completes_commands_and_options() -> None:
    assert complete("rankkit ev") == ["eval"]
    assert "--qrels" in complete("rankkit eval --qr")
    script = subprocess.run([sys.executable, "-m", "rankkit", "--show-completion", "bash"], capture_output=True,
                            text=True, timeout=120, check=False,
                            env={**os.environ, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"})
    assert script.returncode == 0 and "_RANKKIT_COMPLETE=complete_bash" in script.stdout
