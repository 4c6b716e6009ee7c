"""The program a command runs: ``python SCRIPT ARGS``, ``python -m MODULE ARGS``, or any command as given."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from nsync.errors import UsageError


def build_command(target: Sequence[str], module: str | None, python: str | None = None) -> list[str]:
    """The argv to run: ``python SCRIPT ARGS``, ``python -m MODULE ARGS``, or any command as given."""
    interpreter = python or os.environ.get("NSYNC_PYTHON") or shutil.which("python3") or sys.executable
    if module:
        return [interpreter, "-m", module, *target]
    if not target:
        raise UsageError("nothing to profile: give SCRIPT [ARGS]..., -m MODULE [ARGS]... or -- COMMAND [ARGS]...")
    first = target[0]
    if first.endswith(".py"):
        if not Path(first).is_file():
            raise UsageError(f"script not found: {first}")
        return [interpreter, *target]
    if not (Path(first).is_file() or shutil.which(first)):
        raise UsageError(f"command not found: {first}")
    return list(target)


def command_of_line(label: str, text: str, python: str | None = None) -> list[str]:
    """The argv of one quoted command line (``SCRIPT ARGS``, ``-m MODULE ARGS`` or any command; split as a
    shell would split it, and no shell runs it); ``label`` names it in errors."""
    try:
        words = shlex.split(text)
    except ValueError as error:
        raise UsageError(f"{label} {text!r}: {error}") from None
    module = words[1] if words[:1] == ["-m"] and len(words) > 1 else None
    return build_command(words[2:] if module else words, module, python)


def output_name(target: Sequence[str], module: str | None) -> str:
    """Base name of the outputs: the module, script or command name."""
    if module:
        return module.rsplit(".", 1)[-1]
    if not target:
        return "nsync"
    return next((Path(arg).stem for arg in target if arg.endswith(".py")), Path(target[0]).name)


# the names of what nsync profile writes, and of the traces nsync reads: NAME then one of these
TRACE_SUFFIXES = (".sqlite.xz", ".sqlite", ".nsys-rep", ".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json")


def trace_stem(trace: Path) -> str:
    """A trace's name without its suffix (``run.sqlite``, ``run.pt.trace.json.gz``: ``run``), as the outputs
    written beside it are named."""
    name = trace.name
    for suffix in TRACE_SUFFIXES:
        if name.endswith(suffix):
            return name.removesuffix(suffix)
    return trace.stem
