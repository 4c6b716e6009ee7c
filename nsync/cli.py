"""The ``nsync`` command: thin wiring of the library's public functions to files and exit codes."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

import nsync
from nsync import EXIT_CODES, AnalysisConfig, NsyncError

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="Find the Python lines whose CUDA syncs make the GPU wait, from Nsight Systems traces.\n\n"
    "Exit codes: " + "; ".join(f"{code} {text}" for code, text in EXIT_CODES.items()),
)
err = Console(stderr=True, highlight=False)


@app.callback()
def _root() -> None:
    """Find the Python lines whose CUDA syncs make the GPU wait, from Nsight Systems traces."""


def reported(command: Callable[..., None]) -> Callable[..., None]:
    """Turn NsyncError into one line on stderr and its exit code (the one place errors are handled)."""

    @functools.wraps(command)
    def wrapper(*args: object, **kwargs: object) -> None:
        try:
            command(*args, **kwargs)
        except NsyncError as error:
            sys.stderr.write(f"nsync: error: {error}\n")
            raise typer.Exit(error.exit_code) from None
        except Exception as error:  # a bug must not print a traceback at users
            if os.environ.get("NSYNC_DEBUG"):
                raise
            err.print(
                f"nsync: internal error: {type(error).__name__}: {error} (set NSYNC_DEBUG=1 for the traceback)",
                markup=False,
            )
            raise typer.Exit(1) from None

    return wrapper


@app.command(
    "analyze",
    epilog="Examples:\n\n  nsync analyze report.sqlite\n\n"
    "  nsync analyze report.sqlite --json result.json --top 20\n\n"
    "  nsync analyze report.sqlite --step-range train_step --json -",
)
@reported
def analyze_command(
    trace: Annotated[
        Path,
        typer.Argument(help="nsys SQLite export (nsys export --type sqlite --include-blobs=true)", show_default=False),
    ],
    json_path: Annotated[
        str | None, typer.Option("--json", help="Write the JSON result here ('-': stdout).", metavar="PATH")
    ] = None,
    top: Annotated[int, typer.Option(min=1, help="Call sites to show in the table.")] = 10,
    step_range: Annotated[
        str | None, typer.Option(help="NVTX range that marks one step (default: auto).", metavar="NAME")
    ] = None,
    warmup_steps: Annotated[
        int | None, typer.Option(min=0, help="Leading steps to skip (default: 1 if >= 4 steps).")
    ] = None,
) -> None:
    """Rank the Python call sites whose syncs cost GPU time in an nsys trace."""
    config = AnalysisConfig(step_range=step_range, warmup_steps=warmup_steps)
    with err.status("loading trace", spinner="dots") as status:
        result = nsync.analyze(trace, config, progress=lambda msg: status.update(msg))
    if json_path == "-":
        sys.stdout.write(nsync.render_json(result, top=None))
        return
    if json_path:
        write_text(Path(json_path), nsync.render_json(result, top=None))
    piped = not sys.stdout.isatty() and "COLUMNS" not in os.environ
    Console(highlight=False, width=120 if piped else None).print(nsync.summary(result, top))
    if json_path:
        err.print(f"wrote {json_path}", markup=False)


def write_text(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as error:
        raise NsyncError(f"cannot write {path}: {error.strerror}") from error


def main() -> None:
    app()
