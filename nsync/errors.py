"""One exception hierarchy; each class carries the exit code the CLI returns for it, one class per documented
code (:data:`EXIT_CODES`, the one table: the README's copy is checked against it by a test)."""

from __future__ import annotations


class NsyncError(Exception):
    """An error the user can act on; ``str(err)`` is the one-line message."""

    exit_code = 1


class UsageError(NsyncError):
    exit_code = 2


class NoCudaUsed(UsageError):
    """The program used no CUDA within the capture window's wait: there is nothing on a GPU to capture."""


class ProgramFailed(NsyncError):
    """The program failed before its first step, in the calibration run: nsync stops with its exit code."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class TraceError(NsyncError):
    """The input file cannot be analysed (not SQLite, not nsys, damaged)."""

    exit_code = 1


class ProfilerError(NsyncError):
    """The profiler (nsys, or torch.profiler) is missing or failed."""

    exit_code = 4


class NsysError(ProfilerError):
    """nsys is missing or failed."""


class TorchProfilerError(ProfilerError):
    """``nsync profile --backend torch``: the program could not start, or torch.profiler wrote no trace."""


class GateFailed(NsyncError):
    """A CI gate failed (nsync.gates): the candidate regressed, or a sync costs more than the threshold."""

    exit_code = 3


class CannotJudge(NsyncError):
    """A CI gate that cannot judge its input (no prediction; runs that cannot be compared): ``what`` it cannot
    do, and ``why``."""

    exit_code = 1

    def __init__(self, what: str, why: str) -> None:
        super().__init__(f"{what}: {why}")
        self.what, self.why = what, why


class Interrupted(BaseException):
    """Ctrl-C, as nsync ends on it: ``nsync: interrupted`` and 130. A BaseException that is no
    KeyboardInterrupt, so that it passes through typer (which turns a KeyboardInterrupt into a silent exit
    130) and through every ``except Exception``."""

    exit_code = 130


EXIT_CODES: dict[int, str] = {
    0: "success (a trace with no CUDA activity is a success too)",
    1: "unusable input: neither an nsys SQLite export nor a torch.profiler trace, truncated or unreadable; out of "
    "memory; or a CI gate that cannot judge",
    2: "usage error: bad option or argument, missing file, an option that needs a package not installed; "
    "nsync profile of a program that used no CUDA (within --wait-for-steps seconds, or in its steps under nsys)",
    3: "a CI gate failed: nsync diff --fail-on-regression (the candidate regressed), nsync measure "
    "--fail-on-regression (B measured slower), nsync analyze --fail-above (a sync costs more than PCT % of a step) "
    "or nsync ranks --fail-above (a rank's sync holds the others past PCT %)",
    4: "nsys could not be found or failed (also: a `.nsys-rep` it could not export); with --backend torch, "
    "torch.profiler wrote no trace",
    130: "interrupted",
}
