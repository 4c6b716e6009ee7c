"""What ``nsys profile`` prints on its stdout, told apart from what the profiled program prints there.

nsys relays the program's stdout through its own (the program writes into a pipe nsys reads), and adds its
own lines: ``Generating '/tmp/nsys-report-1a2b.qdstrm'``, progress bars joined by carriage returns, a
``Generated:`` block, capture-range notes. Those must not land in the user's output, logs or pipes. The
program's bytes are passed on unchanged and at once, a partial line included, except a partial line that
could still become one of nsys's (held until its end).
"""

from __future__ import annotations

import io
import re
import sys
import threading
import typing
from collections.abc import Callable
from typing import IO, Any

# Lines (or carriage-return-separated pieces of a line) that nsys 2022.4 to 2025.x print on stdout.
_PROGRESS = re.compile(rb"\[\d+/\d+\] \[[= ]*\d+%[= ]*\].*")  # '[1/1] [===50%      ] run.nsys-rep'
_OWN = re.compile(
    rb"Generating '[^']*'"
    rb"|Generated:"
    rb"|Collecting data\.\.\."
    rb"|Processing events\.\.\."
    rb"|Saving temporary \"[^\"]*\" file to disk\.\.\."
    rb"|Creating final output files\.\.\."
    rb"|Processing \[[= ]*\d*%?[= ]*\].*"
    rb"|Capture range (?:started|ended) in the application\."
    rb"|The target application terminated\..*"
    rb"|Waiting for termination of re-parented processes.*"
    rb"|Use the `--wait` option to modify behavior upon target application termination\."
    rb"|Process is terminated\."
    rb"|No reports were generated"
    rb"|The application terminated before the collection started\. No report was generated\."
)
_REPORT_PATH = re.compile(rb"    \S.*\.(?:nsys-rep|qdrep|qdstrm|sqlite)")  # the paths under 'Generated:'
_STARTS = (
    b"Generat",
    b"[",
    b"Collecting",
    b"Processing",
    b"Saving",
    b"Creating",
    b"Capture range",
    b"The target application",
    b"Waiting for",
    b"Use the",
    b"Process is",
    b"No report",
    b"The application",
)
_OWN_START = re.compile(rb"Generating '|Generated:$|Collecting data|Capture range|\r?\[\d+/\d+\] \[")
_MID_LINE_STARTS = (b"Generating '", b"Generated:", b"Collecting data", b"Capture range", b"\r[", b"[")
_LONGEST_START = max(map(len, _MID_LINE_STARTS))
_SILENT = re.compile(rb"Generating '[^']*'|Generated:")  # said by nsync itself ('exporting ...', 'wrote ...')


class NsysOutput:
    """Splits nsys's stdout into the program's bytes and nsys's own lines (see the module docstring)."""

    def __init__(self) -> None:
        self._held = b""  # the start of a line that may still turn out to be nsys's
        self._open = False  # the program's bytes passed on end without a newline (its line is still open)
        self._after_generated = False  # inside the 'Generated:' block, whose lines are report paths

    def feed(self, chunk: bytes) -> tuple[bytes, list[str]]:
        """(the program's bytes to pass on now, nsys's own lines to report) for the next ``chunk``. What
        follows a line the program left open is judged afresh: nsys writes its own lines after the
        program's last bytes, newline or not."""
        data = self._held + chunk
        self._held = b""
        program, own = bytearray(), []
        while data:
            end = data.find(b"\n")
            if end < 0:
                keep = self._held_from(data)
                program += data[:keep]
                self._held = data[keep:]
                self._open |= keep > 0
                break
            line, data = data[: end + 1], data[end + 1 :]
            start = self._nsys_from(line[:-1])
            if start is None:
                program += line
                self._after_generated = False
            else:
                if start or self._open:  # the program's last line, left open: end it before nsync goes on
                    program += line[:start] + b"\n"
                own.extend(self._reported(line[start:-1]))
            self._open = False
        return bytes(program), own

    def finish(self) -> tuple[bytes, list[str]]:
        """What is left when the stream ends: a held partial line is nsys's only if it is one of its lines."""
        held, self._held = self._held, b""
        start = self._nsys_from(held) if held else None
        if start is None:
            return held, []
        return (held[:start] + b"\n" if start or self._open else b""), self._reported(held[start:])

    def _nsys_from(self, line: bytes) -> int | None:
        """Where nsys's own text begins in ``line``: 0 for a line of its own, later when it follows the
        program's last bytes on the same line (the two came in one read), None when there is none."""
        if self._is_nsys(line):
            return 0
        for found in _OWN_START.finditer(line):
            if found.start() and self._is_nsys(line[found.start() :]):
                return found.start()
        return None

    def _is_nsys(self, line: bytes) -> bool:
        pieces = line.split(b"\r")
        if pieces[0] == b"" and len(pieces) > 1 and not _PROGRESS.fullmatch(pieces[1]):
            return False  # only a progress bar starts with a carriage return
        pieces = [p for p in pieces if p]
        if not pieces:
            return False
        if self._after_generated and len(pieces) == 1 and _REPORT_PATH.fullmatch(pieces[0]):
            return True
        own = all(_PROGRESS.fullmatch(p) or _OWN.fullmatch(p) for p in pieces)
        if own:
            self._after_generated = pieces[-1] == b"Generated:"
        return own

    @staticmethod
    def _reported(line: bytes) -> list[str]:
        """nsys's lines worth saying: not its progress bars, nor what nsync says in its own words."""
        pieces = [p for p in line.split(b"\r") if p]
        kept = [p for p in pieces if not _PROGRESS.fullmatch(p) and not _SILENT.fullmatch(p)]
        if len(pieces) == 1 and _REPORT_PATH.fullmatch(pieces[0]):
            return []
        return [p.decode(errors="replace") for p in kept]

    def _held_from(self, partial: bytes) -> int:
        """Where to hold back the end of an unfinished line: from where nsys's own text may have begun (at
        the start, or after the program's last bytes), else nothing (``len(partial)``)."""
        text = partial.lstrip(b"\r")
        if not self._open and (
            (self._after_generated and (b"    ".startswith(text) or text.startswith(b"    ")))
            or any(start.startswith(text) or text.startswith(start) for start in _STARTS)
        ):
            return 0
        first = 0 if self._open else 1  # a line the program left open may go on with nsys's text at once
        found = _OWN_START.search(partial, first)
        if found:
            return found.start()
        tail = max(first, len(partial) - _LONGEST_START)
        return next(
            (k for k in range(tail, len(partial)) if any(t.startswith(partial[k:]) for t in _MID_LINE_STARTS)),
            len(partial),
        )


def relay(source: IO[bytes], sink: IO[bytes], say: Callable[[str], None]) -> threading.Thread:
    """Read ``source`` (nsys's stdout) on a thread until it closes: the program's bytes to ``sink`` as they
    come, nsys's own lines to ``say``. A sink that goes away (a closed pipe) stops the passing on, never
    the reading, which nsys would block on."""
    split = NsysOutput()

    def pump() -> None:
        open_sink = True
        while True:
            chunk = source.read1(1 << 16) if hasattr(source, "read1") else source.read(1 << 16)
            program, own = split.feed(chunk) if chunk else split.finish()
            if program and open_sink:
                try:
                    sink.write(program)
                    sink.flush()
                except (BrokenPipeError, ValueError, OSError):
                    open_sink = False
            for line in own:
                say(f"nsys: {line}")  # (the command line makes it printable, as every message)
            if not chunk:
                return

    thread = threading.Thread(target=pump, name="nsys-stdout", daemon=True)
    thread.start()
    return thread


def program_stream(name: str) -> IO[bytes]:
    """Where the program's output goes: our stdout (or stderr), as bytes (a notebook's has no buffer: text)."""
    stream = sys.stderr if name == "stderr" else sys.stdout
    buffer = getattr(stream, "buffer", None)
    if buffer is not None:
        return buffer

    class Text(io.RawIOBase):
        def write(self, data: Any) -> int:
            stream.write(bytes(data).decode(errors="replace"))
            return len(data)

        def flush(self) -> None:
            stream.flush()

    return typing.cast(IO[bytes], Text())
