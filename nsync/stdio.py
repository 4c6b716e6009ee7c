"""The process's own standard streams, shared by the entry point and the CLI."""

from __future__ import annotations

import os
import sys


def drop_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's flush at exit does not fail on a closed pipe."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
