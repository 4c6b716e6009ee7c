"""What every command does with its result: the files asked for (through nsync.write), the summary or the JSON
on stdout, the warnings on stderr, then its CI gate; and the spinner and messages while it works."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer
from rich.console import Console, RenderableType

from nsync.cli.app import err, say
from nsync.errors import CannotJudge, Interrupted, NsyncError, UsageError
from nsync.memory import release_freed_memory
from nsync.render.measurement import verdict_line
from nsync.render.options import RenderOptions
from nsync.render.text import diff_headline, printable
from nsync.render.write import check_writable
from nsync.report import Analysis, Diff, Measurement, Ranks
from nsync.stdio import drop_stdout, raise_if_interrupted

T = TypeVar("T")

if TYPE_CHECKING:
    from nsync.load.calibration import Calibration
    from nsync.report import Result


@dataclasses.dataclass(frozen=True)
class Outputs:
    """The files a command writes (``json`` may be '-': stdout), checked before the work begins."""

    json: str | None = None
    html: Path | None = None
    markdown: Path | None = None
    db: Path | None = None
    patch: Path | None = None
    switch: Path | None = None
    sarif: Path | None = None
    annotations: bool = False  # GitHub's workflow commands on stdout, after the summary

    def files(self) -> list[tuple[str, Path, str]]:
        """(flag, path, format) of each file asked for."""
        named = [("--json", None if self.json in (None, "-") else Path(str(self.json)), "json")]
        named += [("--html", self.html, "html"), ("--markdown", self.markdown, "markdown"), ("--db", self.db, "db")]
        named += [("--suggest-patch", self.patch, "patch"), ("--suggest-switch", self.switch, "switch")]
        named += [("--sarif", self.sarif, "sarif")]
        return [(flag, path, format) for flag, path, format in named if path is not None]

    def check(self, reading: Path | None = None) -> None:
        """Refuse now, before minutes of work, a file that cannot be written (nsync.render.write), or a database
        path that holds something else (nsync.render.database); ``reading``: the trace, never written."""
        if self.annotations and self.json == "-":
            raise UsageError("--annotations and --json - both write to stdout: give --json a file")
        check_writable([(flag, path) for flag, path, _ in self.files()], reading)
        if self.db is not None:
            from nsync.render.database import check_database_path

            try:
                check_database_path(self.db, reading)
            except UsageError as error:
                raise UsageError(f"--db {error}") from None


@dataclasses.dataclass(frozen=True)
class View:
    """How the result reads: the call sites listed, the verdict alone (``quiet``), every stack (``verbose``),
    where the traced files are."""

    top: int = 10
    quiet: bool = False
    verbose: bool = False
    source_dirs: tuple[Path, ...] = ()

    def options(self, format: str, width: int = 120) -> RenderOptions:
        top = None if format == "html" else self.top  # (the page lists its own 50)
        return RenderOptions(top, width, self.source_dirs, self.verbose, warnings=False)


@dataclasses.dataclass(frozen=True)
class Gate:
    """A CI gate, run once the outputs are written: ``judge(result, pct)`` raises GateFailed (exit 3) or
    CannotJudge (exit 1, unless ``pass_inconclusive``, said as much); ``pct`` None: not asked for."""

    flag: str
    pct: float | None
    judge: Callable[[Any, float], None]
    pass_inconclusive: bool = False

    def run(self, result: Result) -> None:
        if self.pct is None:
            return
        try:
            self.judge(result, self.pct)
        except CannotJudge as error:
            if not self.pass_inconclusive:
                why = f"{error.why} (--pass-inconclusive lets it pass)"
                raise CannotJudge(f"{self.flag} {error.what}", why) from None
            say(f"{self.flag} {error.what} ({printable(error.why)}): passing, as --pass-inconclusive asks")


def finish(result: Result, outputs: Outputs, view: View | None = None, gate: Gate | None = None) -> None:
    """Write the result (emit), say whether it was cut short (nsync measure), run the gate; exit 1 when a file
    could not be written."""
    complete = emit(result, outputs, view or View())
    if isinstance(result, Measurement) and result.interrupted:  # (its figures said; no gate judges it)
        raise Interrupted
    if gate is not None:
        gate.run(result)
    if not complete:
        raise typer.Exit(1)


def emit(result: Result, outputs: Outputs, view: View) -> bool:
    """Each file asked for (one that fails keeps no other from being written), then the JSON or the summary on
    stdout, then what was written and what failed, then the warnings on stderr (``view.quiet``: the verdict
    alone, no warnings). False when a file could not be written."""
    import nsync

    written, failed = [], []
    for flag, path, format in outputs.files():
        try:
            with err.status(f"rendering {flag[2:]}", spinner="dots"):
                nsync.write(result, path, format, view.options(format))
            written.append(path)
        except NsyncError as error:  # noqa: PERF203 -- a few files, each failure reported
            failed.append(str(error))
    if outputs.json == "-":
        sys.stdout.write(nsync.render_json(result))
    else:
        _print(lambda width: _summary(result, view, width))
    if outputs.annotations:
        from nsync.render.annotations import render_annotations

        sys.stdout.write(render_annotations(result, view.options("annotations")))
    for path in written if not view.quiet else ():
        say(f"wrote {path}")
    for message in failed:
        sys.stderr.write(f"nsync: error: {printable(message)}\n")
    if isinstance(result, (Analysis, Ranks)) and not view.quiet:  # (the others say theirs in the summary)
        kind = "note" if isinstance(result, Analysis) and result.status != "ok" else "warning"
        for notice in result.warnings:
            say(f"{kind}: {notice}")
    return not failed


def _summary(result: Result, view: View, width: int) -> RenderableType:
    import nsync

    if view.quiet and isinstance(result, Analysis):
        verdict = result.verdict
        return printable(f"verdict: {verdict.text}" if verdict else "verdict: none (no prediction)")
    if view.quiet and isinstance(result, Diff):
        return printable(diff_headline(result))
    if view.quiet and isinstance(result, Measurement):
        return printable(verdict_line(result))
    if view.quiet and isinstance(result, Ranks):
        return printable(f"verdict: {result.verdict}")
    return nsync.summary(result, view.options("text", width))


class StdoutConsole(Console):
    """The summary's console: a reader that goes away ends the command quietly (rich would exit 1)."""

    def on_broken_pipe(self) -> None:
        drop_stdout()
        raise typer.Exit(0)


def _width() -> int | None:
    """Rich's width: the terminal's, or 120 columns when piped (rich would pick 80)."""
    return 120 if not sys.stdout.isatty() and "COLUMNS" not in os.environ else None


def _print(show: Callable[[int], RenderableType]) -> None:
    """A summary on stdout: coloured on a terminal; plain text in a pipe or a CI log, and no line padded with the
    spaces rich leaves where it wraps."""
    if sys.stdout.isatty():
        terminal = StdoutConsole(highlight=False, width=_width())
        terminal.print(show(terminal.width))
        return
    buffer = io.StringIO()
    plain = Console(file=buffer, highlight=False, width=_width(), color_system=None)
    plain.print(show(plain.width))
    sys.stdout.write("".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines()))


@contextlib.contextmanager
def spinning(text: str) -> Iterator[Callable[..., Callable[[str], None]]]:
    """A spinner on stderr while the work runs, and ``progress(prefix)``: a function that puts each stage's name
    on it (after ``prefix``). Between stages the memory the last one freed goes back to the OS (a process-wide
    setting, so the command line's, not the library's)."""
    with err.status(text, spinner="dots") as status:

        def progress(prefix: str = "") -> Callable[[str], None]:
            def stage(name: str) -> None:
                raise_if_interrupted()  # a Ctrl-C a library swallowed ends the command at the next stage
                release_freed_memory()
                status.update(prefix + name)

            return stage

        yield progress


def release(_stage: str) -> None:
    """Between an analysis's stages (no spinner: the messages say what runs): see spinning."""
    release_freed_memory()


def calibration_for(trace: Path, use: bool, explicit: Path | None = None, quiet: bool = False) -> Calibration | None:
    """The calibration to fit predictions to: ``explicit``, else the one ``nsync profile`` left beside the trace
    (none: uncalibrated). A bad file is an error, never silently ignored; the one used is said (not ``quiet``)."""
    import nsync

    if explicit is not None and not use:
        raise UsageError("--calibration and --no-calibrate contradict each other")
    calibration = nsync.calibration_of(trace, explicit or "beside") if use else None
    if calibration is not None and not quiet:
        say(f"calibrated by {calibration.path}")
    return calibration


def refuse_with_from(**given: object) -> None:
    """--from renders a saved result as it is: the flags (and arguments) that need a trace are refused."""
    named = [flag for flag, value in given.items() if value is not None]
    traces = [flag for flag in named if not flag.startswith("-")]  # TRACE, EXPORT...: a trace itself
    flags = [flag for flag in named if flag.startswith("-")]
    if traces:
        raise UsageError(f"--from renders a saved result, and {traces[0]} is a trace to analyse: give one or the other")
    if flags:
        need = "needs" if len(flags) == 1 else "need"
        raise UsageError(f"--from renders a saved result as it is: {', '.join(flags)} {need} a trace to analyse")


def required(value: T | None, name: str, what: str) -> T:
    """``value``, the argument ``name``; its absence a usage error that says ``what`` it is. A path that does
    not exist is said at once, before the libraries the analysis needs are loaded (a second)."""
    if value is None:
        raise UsageError(f"Missing argument '{name}': {what}")
    if isinstance(value, Path) and not value.exists():
        raise UsageError(f"{value}: no such file")
    return value


def loaded(path: Path, kind: type[Result], outputs: Outputs) -> Result:
    """The result of ``kind`` a command's --json saved in ``path`` (--from), once the outputs are checked."""
    import nsync

    outputs.check(path)
    return nsync.load_result(path, kind)
