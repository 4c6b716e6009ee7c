"""The ``nsync`` command's entry point: Ctrl-C and a closed pipe end it quietly, even during start-up."""

from __future__ import annotations

import os
import sys


def main() -> None:
    try:
        from nsync.cli import run

        code = run(sys.argv[1:])
    except KeyboardInterrupt:
        sys.stderr.write("nsync: interrupted\n")
        code = 130
    try:
        sys.stdout.flush()  # now, while a closed pipe can still be told apart from an error
    except BrokenPipeError:  # the reader went away (`nsync analyze ... | head`): nothing left to say
        drop_stdout()
    sys.exit(code)


def drop_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's flush at exit does not fail on a closed pipe."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


if __name__ == "__main__":
    main()
