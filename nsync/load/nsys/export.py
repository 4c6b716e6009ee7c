"""nsys export: a report to SQLite, with the Python frames where this nsys can carry them.

Every subprocess gets an argument list; nothing is ever passed through a shell.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from nsync.errors import NsysError
from nsync.load.files import require_file
from nsync.load.nsys.locate import Nsys, find_nsys

Say = Callable[[str], None]


@contextmanager
def exported(report: Path, say: Say) -> Iterator[Path]:
    """A report the user gave as .nsys-rep, exported to a temporary SQLite (the report is left as it is)."""
    require_file(report)
    try:
        nsys = find_nsys()
    except NsysError as err:
        raise NsysError(f"{report} is an nsys report and exporting it needs nsys: {err}") from err
    with tempfile.TemporaryDirectory(prefix="nsync-") as tmp:
        say(f"exporting {report.name} with nsys {nsys.version_str}")
        yield export_sqlite(nsys, report, say, target=Path(tmp) / (report.stem + ".sqlite"))


EXPORT_TIMEOUT_S = 1800  # an export of a multi-GB report takes minutes; a hung one must not block forever
# What an older nsys says of a report written by a newer one (2022.4 here on a 2025.3 report; others seen)
_NEWER_REPORT = ("Version not supported", "Version number is invalid", "ProtobufParseException")
_VERSION_IN_REPORT = re.compile(rb"(20[2-9][0-9]\.[0-9]{1,2}\.[0-9]{1,2})")


def export_sqlite(
    nsys: Nsys, report: Path, say: Say, target: Path | None = None, timeout_s: float = EXPORT_TIMEOUT_S
) -> Path:
    """``nsys export`` to SQLite, with the Python frames (``--include-blobs``) where this nsys can."""
    target = target or report.with_suffix(".sqlite")
    argv = [str(nsys.path), "export", "--type", "sqlite", "--force-overwrite=true", "-o", str(target)]
    if "include-blobs" in nsys.export_flags:
        argv.append("--include-blobs=true")
    argv.append(str(report))
    try:
        done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=timeout_s)
    except subprocess.TimeoutExpired as err:
        raise NsysError(
            f"nsys export of {report} did not finish in {timeout_s:.0f} s; export it by hand "
            f"('{nsys.path} export --type sqlite --include-blobs=true {report}') and analyse the .sqlite"
        ) from err
    if done.returncode != 0 or not target.is_file():
        output = (done.stderr or done.stdout).strip()
        if any(sign in output for sign in _NEWER_REPORT):
            written_by = report_version(report)
            raise NsysError(
                f"{report} was written by a newer nsys{f' ({written_by})' if written_by else ''} than this one "
                f"({nsys.version_str}, {nsys.path}): export it with nsys >= {written_by or 'the one that captured it'} "
                "(pass --nsys PATH or set NSYS), or export it where it was captured and analyse the .sqlite"
            )
        detail = output.splitlines()[-1:] or [f"exit code {done.returncode}"]
        raise NsysError(f"nsys export failed for {report}: {detail[0]}")
    return target


def report_version(report: Path) -> str | None:
    """The nsys version a report names in its header (the first YYYY.N.N in its first 64 KiB), if any."""
    try:
        with report.open("rb") as handle:
            match = _VERSION_IN_REPORT.search(handle.read(1 << 16))
    except OSError:
        return None
    return match.group(1).decode() if match else None
