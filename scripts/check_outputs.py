"""Every output of every bundled trace and diff pair, written by one nsync and compared with another's.

A change that should not change what users get (a refactor) is checked by writing every output before and
after, and comparing them byte for byte (the HTML's "generated" minute apart; a SQLite file by its SQL dump):

    git worktree add /tmp/nsync-before REV
    PYTHONPATH=/tmp/nsync-before python scripts/check_outputs.py write /tmp/outputs-before
    python scripts/check_outputs.py write /tmp/outputs-after
    python scripts/check_outputs.py compare /tmp/outputs-before /tmp/outputs-after

``write`` runs ``python -m nsync`` (whichever nsync the interpreter imports first: PYTHONPATH picks a worktree)
on the traces decompressed once into one folder, so that the paths inside the outputs are the same for both.
``compare`` lists every file of the second folder that differs from the first's or is not there, and exits 1 if
any does (``write --only GLOB`` writes a part: the traces, and diffs named diff-A-B, that match).
"""

from __future__ import annotations

import argparse
import fnmatch
import lzma
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACES = Path(tempfile.gettempdir()) / "nsync-check-outputs-traces"
DIFF_PAIRS = [
    ("w_item_healthy", "w_item_degraded"),
    ("w_mask_healthy", "w_mask_degraded"),
    ("print_ok", "print_deg"),
    ("timm_gradnorm_healthy", "timm_gradnorm"),
    ("p2", "p3"),
    ("print_ok", "resnet_train"),  # two different programs: inconclusive
]
_GENERATED = re.compile(rb"\d{4}-\d\d-\d\d \d\d:\d\d UTC")


def traces() -> dict[str, Path]:
    """Every bundled trace (fixtures/**/*.sqlite.xz), decompressed into TRACES (once), each with its calibration.
    A trace of a subfolder is named by its path: ``fresh2__timm_perclass``; the top-level h200 and real ones by
    their own name (the diff pairs use those)."""
    TRACES.mkdir(exist_ok=True)
    found = {}
    for packed in sorted(ROOT.glob("fixtures/**/*.sqlite.xz")):
        folder = packed.parent.relative_to(ROOT / "fixtures")
        stem = packed.name.removesuffix(".sqlite.xz")
        name = stem if str(folder) in ("h200", "real") else "__".join([*folder.parts, stem])
        target = TRACES / f"{name}.sqlite"
        if not target.exists():
            with lzma.open(packed) as src, target.open("wb") as dst:
                shutil.copyfileobj(src, dst)
        calibration = packed.with_name(f"{stem}.calibration.json")
        if calibration.exists():
            shutil.copy(calibration, TRACES / f"{name}.calibration.json")
        found[name] = target
    return found


def nsync(out: Path, name: str, *args: str) -> None:
    """One command: its stdout, stderr and exit code into ``out/name.{stdout,stderr,code}``."""
    env = {**os.environ, "COLUMNS": "120", "NO_COLOR": "1", "TERM": "dumb"}
    done = subprocess.run([sys.executable, "-m", "nsync", *args], capture_output=True, env=env, cwd=out)
    (out / f"{name}.stdout").write_bytes(done.stdout)
    (out / f"{name}.stderr").write_bytes(done.stderr)
    (out / f"{name}.code").write_text(f"{done.returncode}\n")


def write(out: Path, only: str = "*") -> None:
    out.mkdir(parents=True)
    found = traces()
    for name, trace in found.items():
        if not fnmatch.fnmatch(name, only):
            continue
        print(f"analyze {name}", flush=True)
        nsync(out, name, "analyze", str(trace), "--json", f"{name}.json", "--markdown", f"{name}.md",
              "--html", f"{name}.html", "--db", f"{name}.db")  # fmt: skip
        nsync(out, f"{name}-quiet", "analyze", str(trace), "-q", "--no-calibrate")
        nsync(out, f"{name}-from", "analyze", "--from", f"{name}.json", "--top", "3", "--markdown", f"{name}-from.md")
    for baseline, candidate in DIFF_PAIRS:
        name = f"diff-{baseline}-{candidate}"
        if not fnmatch.fnmatch(name, only):
            continue
        print(name, flush=True)
        nsync(out, name, "diff", str(found[baseline]), str(found[candidate]), "--json", f"{name}.json",
              "--markdown", f"{name}.md", "--html", f"{name}.html")  # fmt: skip


def comparable(path: Path) -> bytes:
    if path.suffix == ".db":
        with sqlite3.connect(path) as db:
            return "\n".join(db.iterdump()).encode()
    data = path.read_bytes()
    return _GENERATED.sub(b"<minute> UTC", data) if path.suffix == ".html" else data


def compare(before: Path, after: Path) -> int:
    """Every file of ``after`` against ``before``'s (``before`` may hold more: a full run, against a part)."""
    names = sorted(p.name for p in after.iterdir())
    differ = [n for n in names if not (before / n).exists() or not (after / n).exists()]
    differ += [n for n in names if n not in differ and comparable(before / n) != comparable(after / n)]
    for name in sorted(differ):
        print(f"differs: {name}")
    print(f"{len(names) - len(differ)} of {len(names)} files identical")
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    writing = commands.add_parser("write")
    writing.add_argument("out", type=Path)
    writing.add_argument("--only", default="*", help="the traces (and diffs: diff-A-B) whose names match this glob")
    both = commands.add_parser("compare")
    both.add_argument("before", type=Path)
    both.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.command == "write":
        write(args.out, args.only)
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    raise SystemExit(main())
