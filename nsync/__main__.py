"""The ``nsync`` command's entry point: Ctrl-C and a closed pipe end it quietly, even during start-up."""

from __future__ import annotations

import os
import sys

from nsync.stdio import drop_stdout, interrupted, watch_ctrl_c


def main() -> None:
    sys.unraisablehook = _interrupted_or_default
    watch_ctrl_c()
    try:
        from nsync.cli import run

        code = run(sys.argv[1:])
    except BaseException as error:
        if not _is_interrupt(error):
            raise
        sys.stderr.write("nsync: interrupted\n")
        code = 130
    else:
        if interrupted():  # a Ctrl-C whose KeyboardInterrupt a library swallowed, after the last stage
            sys.stderr.write("nsync: interrupted\n")
            code = 130
    try:
        sys.stdout.flush()  # now, while a closed pipe can still be told apart from an error
    except BrokenPipeError:  # the reader went away (`nsync analyze ... | head`): nothing left to say
        drop_stdout()
    sys.exit(code)


def _is_interrupt(error: BaseException) -> bool:
    """A Ctrl-C: KeyboardInterrupt, nsync.errors.Interrupted (known by name: importing nsync.errors here could
    itself be interrupted), or an error caused by one."""
    return (
        isinstance(error, KeyboardInterrupt)
        or type(error).__name__ == "Interrupted"
        or (isinstance(error, Exception) and _caused_by_interrupt(error))
    )


def _caused_by_interrupt(error: BaseException) -> bool:
    """Whether ``error`` comes of a KeyboardInterrupt: Python 3.11 turns one raised in ``__set_name__`` while
    a class is created (the stdlib's ``ipaddress``, imported at start-up) into a RuntimeError caused by it."""
    cause = error.__cause__
    while cause is not None and not isinstance(cause, KeyboardInterrupt):
        cause = cause.__cause__
    return cause is not None


def _interrupted_or_default(unraisable: sys.UnraisableHookArgs) -> None:
    """A Ctrl-C that lands inside a compiled module's import (pandas) cannot be raised there: Python prints
    it as "Exception ignored ... KeyboardInterrupt" and goes on. End the command as any Ctrl-C does."""
    if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
        sys.stderr.write("nsync: interrupted\n")
        sys.stderr.flush()
        os._exit(130)
    sys.__unraisablehook__(unraisable)


if __name__ == "__main__":
    main()
