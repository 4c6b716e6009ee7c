"""The process's own standard streams and its Ctrl-C, shared by the entry point and the CLI."""

from __future__ import annotations

import os
import signal
import sys
import threading
from types import FrameType

_CTRL_C = threading.Event()


def watch_ctrl_c() -> None:
    """Remember every Ctrl-C, as well as raising KeyboardInterrupt as Python's own handler does: a library may
    swallow the exception (one did, while a class was registered with an ABC during an import, 3 runs in 148 on
    a busy machine), and the command must end all the same (``raise_if_interrupted``). A SIGINT that is
    ignored (a job in the background) stays ignored."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_ctrl_c)


def _on_ctrl_c(_signum: int, _frame: FrameType | None) -> None:
    _CTRL_C.set()
    raise KeyboardInterrupt


def interrupted() -> bool:
    """Whether a Ctrl-C came since ``watch_ctrl_c``, whatever became of its KeyboardInterrupt."""
    return _CTRL_C.is_set()


def forget_ctrl_c() -> None:
    """A Ctrl-C was handled on purpose (``nsync profile`` lets nsys write what it captured): the command goes on."""
    _CTRL_C.clear()


def raise_if_interrupted() -> None:
    """Raise the KeyboardInterrupt of a Ctrl-C that something swallowed."""
    if _CTRL_C.is_set():
        raise KeyboardInterrupt


def drop_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's flush at exit does not fail on a closed pipe."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
