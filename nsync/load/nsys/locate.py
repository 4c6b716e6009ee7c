"""Find an nsys executable, read its version, and learn which flags it supports from its own help."""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from nsync.errors import NsysError
from nsync.load.model import PYTHON_FRAMES_NSYS

INSTALL_GLOBS = (
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/opt/nvidia/nsight-systems/*/target-linux-*/nsys",
    "/opt/nvidia/nsight-systems-cli/*/bin/nsys",
    "/opt/nvidia/nsight-systems-cli/*/target-linux-*/nsys",
    "/usr/local/cuda*/bin/nsys",
    "/usr/local/cuda*/nsight-systems-*/bin/nsys",
    "/opt/nvidia/nsight-compute/*/host/target-linux-*/nsys",
    "/usr/lib/nsight-systems/bin/nsys",
)
INSTALL_HINT = (
    "install Nsight Systems (https://developer.nvidia.com/nsight-systems; on Debian: enable "
    "non-free and 'apt-get install nsight-systems'), or pass --nsys PATH / set NSYS"
)
_VERSION = re.compile(r"(\d{4})\.(\d+)(?:\.(\d+))?(?:\.(\d+))?")
_LONG_FLAG = re.compile(r"--([a-z][a-z0-9-]*)")


@dataclass(frozen=True)
class Nsys:
    """One nsys installation and what it can do."""

    path: Path
    version: tuple[int, ...]
    profile_flags: frozenset[str]
    export_flags: frozenset[str]

    @property
    def version_str(self) -> str:
        return ".".join(map(str, self.version))

    @property
    def records_python_frames(self) -> bool:
        """Whether its captures can carry Python backtraces into SQLite (flags and version: 2023.4 has the
        flag but cannot export the frames). Without them, CPU sampling buys little."""
        supported = tuple(int(part) for part in PYTHON_FRAMES_NSYS.split("."))
        return (
            "python-backtrace" in self.profile_flags
            and "include-blobs" in self.export_flags
            and self.version[: len(supported)] >= supported
        )

    def importer(self) -> Path | None:
        """The QdstrmImporter shipped beside this nsys (used when nsys fails to import its own capture)."""
        real = self.path.resolve()
        for base in (real.parent, real.parent.parent, real.parent.parent.parent, self.path.parent.parent / "lib"):
            for pattern in ("QdstrmImporter", "*/QdstrmImporter", "nsight-systems/*/QdstrmImporter"):
                found = sorted(glob.glob(str(base / pattern)))
                if found:
                    return Path(found[-1])
        return None


def candidates(explicit: str | None) -> list[tuple[str, str]]:
    """(where, path) pairs in the order they are tried."""
    found: list[tuple[str, str]] = []
    if explicit:
        return [("--nsys", explicit)]
    if os.environ.get("NSYS"):
        found.append(("$NSYS", os.environ["NSYS"]))
    on_path = shutil.which("nsys")
    if on_path:
        found.append(("PATH", on_path))
    for pattern in INSTALL_GLOBS:
        # newest install first: version folders sort lexically well enough within one pattern
        found.extend(("install folder", p) for p in sorted(glob.glob(pattern), reverse=True))
    return found


def find_nsys(explicit: str | None = None) -> Nsys:
    """The first working nsys among --nsys, $NSYS, PATH and the usual install folders."""
    tried = candidates(explicit)
    named = os.environ.get("NSYS")
    if not explicit and named and not (Path(named).is_file() and os.access(named, os.X_OK)):
        raise NsysError(f"$NSYS is set to {named}, which is not an nsys executable: correct it or unset it")
    for _where, path in tried:
        if Path(path).is_file() and os.access(path, os.X_OK):
            return describe(Path(path))
    if explicit:
        raise NsysError(f"nsys not found at {explicit} (--nsys): {INSTALL_HINT}")
    searched = ["$NSYS", "PATH", *INSTALL_GLOBS]
    raise NsysError(f"nsys not found (searched {', '.join(searched)}): {INSTALL_HINT}")


def describe(path: Path) -> Nsys:
    version_text = _run([str(path), "--version"])
    match = _VERSION.search(version_text)
    if not match:
        printed = " ".join(version_text.split())  # one line, whole words
        printed = printed if len(printed) <= 80 else printed[:80].rsplit(" ", 1)[0] + " ..."
        raise NsysError(f"{path} does not look like nsys ('--version' printed: {printed or 'nothing'})")
    version = tuple(int(part) for part in match.groups() if part is not None)
    return Nsys(
        path=path,
        version=version,
        profile_flags=_flags(_run([str(path), "profile", "--help"])),
        export_flags=_flags(_run([str(path), "export", "--help"])),
    )


def _flags(help_text: str) -> frozenset[str]:
    return frozenset(_LONG_FLAG.findall(help_text))


def _run(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise NsysError(f"cannot run {argv[0]}: {err}") from err
    return done.stdout + done.stderr
