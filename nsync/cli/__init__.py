"""The ``nsync`` command line: one module per command, each parsing its options, calling one function of the
library, writing the result and mapping errors to exit codes (app)."""

from __future__ import annotations

import difflib
import gc
import sys
from typing import TYPE_CHECKING

import typer

from nsync.cli import analyze, diff, measure, profile, ranks  # noqa: F401  (their commands register on app)
from nsync.cli.app import app
from nsync.cli.options import FLAG_OF_SETTING
from nsync.errors import Interrupted
from nsync.memory import tune_allocator
from nsync.settings import name_settings

__all__ = ["app", "run"]
ORDER = ("analyze", "profile", "ranks", "diff", "measure")  # as help lists them (each module registers its own)
app.registered_commands.sort(key=lambda command: ORDER.index(command.name or ""))

# The base of click's usage errors, from a public typer name: typer 0.26+ vendors click, older ones use it.
if TYPE_CHECKING:
    from click import ClickException
else:  # click comes with typer: found through typer's own classes, not imported as a dependency of nsync's
    ClickException = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


def run(argv: list[str]) -> int:
    """Run the command line ``argv``; every error is one line on stderr (``nsync: error: ...``)."""
    tune_allocator()
    name_settings(FLAG_OF_SETTING)  # messages written from now on name the flags
    # A one-shot command makes few reference cycles, and the collector's passes over pandas' objects cost
    # 0.2-0.3 s of a 10 M-row analysis (make bench); memory is handed back when the process ends.
    gc.disable()
    if not argv:  # a short usage, not the whole help, and 2 as click >= 8.2 gives it
        sys.stderr.write(short_usage())
        return 2
    try:
        code = app(argv, prog_name="nsync", standalone_mode=False)
    except typer.Abort:  # older click turns a Ctrl-C outside a command into Abort
        raise Interrupted from None
    except ClickException as error:  # bad option or argument: one line, not a box
        _close_suggestions_only(error)
        message = error.format_message().strip()
        if message:  # (empty when a bare `nsync` printed its help)
            commands = {info.name for info in app.registered_commands}
            command = f"nsync {argv[0]}" if argv and argv[0] in commands else "nsync"
            sys.stderr.write(f"nsync: error: {message} (see '{command} --help')\n")
        return int(getattr(error, "exit_code", 2))
    if code == Interrupted.exit_code:  # typer >= 0.29 turns a Ctrl-C outside a command into a silent 130
        raise Interrupted
    return code if isinstance(code, int) else 0


def _close_suggestions_only(error: Exception) -> None:
    """Keep only the suggestions of an unknown option that are close to it (click offered --verbose for --bogus)."""
    name, possible = getattr(error, "option_name", None), getattr(error, "possibilities", None)
    if isinstance(name, str) and possible:
        error.possibilities = difflib.get_close_matches(name, list(possible), cutoff=SUGGESTION_CUTOFF)  # type: ignore[attr-defined]


SUGGESTION_CUTOFF = 0.75  # --bogus and --verbose: 0.62, --verbos and --verbose: 0.94


def short_usage() -> str:
    """What ``nsync`` alone prints: the usage, each command in a line, and where the rest is."""
    commands = [(info.name or "", info.short_help or "") for info in app.registered_commands]
    width = max(len(name) for name, _ in commands)
    lines = [f"  nsync {name:<{width}}  {text}" for name, text in commands]
    return (
        "\n".join(
            ["Usage: nsync COMMAND [ARGS]...", "", *lines, "", "Run 'nsync COMMAND --help' for a command's options."]
        )
        + "\n"
    )
