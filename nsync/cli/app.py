"""The ``nsync`` command's app: its help, how a command's help reads at 80 columns, and the one place errors
become a line on stderr and an exit code."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer
from rich.console import Console
from typer.core import TyperCommand

from nsync.errors import EXIT_CODES, GateFailed, Interrupted, NsyncError
from nsync.render.text import printable
from nsync.stdio import drop_stdout

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # click's plain help: no boxes, no option name cut to fit a column
    help="Find the Python lines whose CUDA syncs make the GPU wait, from Nsight Systems or torch.profiler "
    "traces.\n\n"
    "Exit codes: " + "; ".join(f"{code} {text}" for code, text in EXIT_CODES.items()),
)
err = Console(stderr=True, highlight=False, soft_wrap=True)


class Command(TyperCommand):
    """A command whose help reads at 80 columns on any typer: the arguments by name in the usage line and
    described in the command's text (typer adds a type to each, '<path>', '<list[str]>'), the options alone
    listed."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                name = param.metavar or (param.name or "").upper()
                name = name if param.required else f"[{name}]"
                pieces.append(f"{name}..." if param.nargs != 1 and not name.endswith("...") else name)
        return pieces

    def format_options(self, ctx: Any, formatter: Any) -> None:
        options = [p.get_help_record(ctx) for p in self.get_params(ctx) if p.param_type_name == "option"]
        if any(options):
            with formatter.section("Options"):
                formatter.write_dl([record for record in options if record])


def examples(*lines: str) -> str:
    """A command's examples for its help, kept as written (click's \\b: no rewrapping), each under 80 columns."""
    return "Examples:\n\n\b\n" + "\n".join(f"  {line}" for line in lines)


def say(message: str) -> None:
    """A message of nsync's for the user, on stderr."""
    err.print(f"nsync: {printable(message)}", markup=False)


def _print_version(value: bool) -> None:
    if value:
        import nsync

        sys.stdout.write(f"nsync {nsync.__version__}\n")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Find the Python lines whose CUDA syncs make the GPU wait, from Nsight Systems or torch.profiler traces."""


def reported(command: Callable[..., None]) -> Callable[..., None]:
    """Turn NsyncError into one line on stderr and its exit code (the one place errors are handled)."""

    @functools.wraps(command)
    def wrapper(*args: object, **kwargs: object) -> None:
        try:
            command(*args, **kwargs)
        except typer.Exit:
            raise
        except KeyboardInterrupt:  # past typer, which would end it silently with 130
            raise Interrupted from None
        except BrokenPipeError:  # the reader went away (`| head`): nothing left to say, and no error
            drop_stdout()
            raise typer.Exit(0) from None
        except GateFailed as error:  # the gate's verdict, not an error of nsync's
            sys.stderr.write(f"nsync: {printable(str(error))}\n")
            raise typer.Exit(error.exit_code) from None
        except NsyncError as error:
            sys.stderr.write(f"nsync: error: {printable(str(error))}\n")
            raise typer.Exit(error.exit_code) from None
        except MemoryError:
            sys.stderr.write(
                "nsync: error: out of memory: analyse a part of the trace with --window START:END, "
                "or plan for less with --max-memory\n"
            )
            raise typer.Exit(1) from None
        except Exception as error:  # a bug must not print a traceback at users
            if os.environ.get("NSYNC_DEBUG"):
                raise
            err.print(
                f"nsync: internal error: {type(error).__name__}: {printable(str(error))} (set NSYNC_DEBUG=1 for "
                "the traceback)",
                markup=False,
            )
            raise typer.Exit(1) from None

    return wrapper
