"""A held-out set's labelling sheet from a harvest (issue 43): only the lines no corpus holds yet, without nsync's
answer, so that each is labelled by hand before it is scored.

    python scripts/label_sheet.py harvest.json > sheet.json

harvest.json is what scripts/h200/harvest-syncs.py writes on the GPU. A line is left out when an earlier set
(fixtures/syncs/*.json) holds its file and line, or its file and code, and when it is one of the harvest
programs' own lines (any file outside site-packages: scripts/h200/'s harvest_each.py too). Each line of the
sheet has the corpus's fields with "pattern" empty; the harvest's own "pattern" field (nsync's answer at harvest
time) is dropped here, never shown. Counts go to stderr.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

CORPORA = Path(__file__).resolve().parents[1] / "fixtures/syncs"


def _known() -> tuple[set, set]:
    at, said = set(), set()
    for corpus in CORPORA.glob("*.json"):
        for line in json.loads(corpus.read_text()).get("lines", []):
            at.add((line["file"], line["line"]))
            said.add((line["file"], line["code"].strip()))
    return at, said


def _harvest_own(file: str) -> bool:
    """The harvest's where() keeps a library's file from its package on, and any other file as it was given."""
    return Path(file).is_absolute() or Path(file).parts[0] == "scripts"


def sheet(harvest: dict) -> tuple[list[dict], dict[str, int]]:
    """The new lines, in the harvest's order, and how many were left out and why."""
    at, said = _known()
    lines, left_out, seen = [], {"earlier set": 0, "harvest script": 0, "program failed": 0}, set()
    for program, found in harvest.items():
        if not isinstance(found, list):
            left_out["program failed"] += 1
            continue
        for entry in found:
            key = (entry["file"], entry["line"])
            if _harvest_own(entry["file"]):
                left_out["harvest script"] += 1
            elif key in at or (entry["file"], entry["code"].strip()) in said or key in seen:
                left_out["earlier set"] += 1
            else:
                seen.add(key)
                lines.append({"library": entry["file"].split("/")[0], "program": program, "file": entry["file"],
                              "line": entry["line"], "function": entry["function"], "code": entry["code"],
                              "syncs": entry["count"], "pattern": "", "context": entry["context"],
                              "context_line": entry["context_line"]})  # fmt: skip
    return lines, left_out


def main() -> None:
    lines, left_out = sheet(json.loads(Path(sys.argv[1]).read_text()))
    print(json.dumps({"lines": lines}, indent=1))
    print(f"{len(lines)} new lines; left out: {left_out}", file=sys.stderr)


if __name__ == "__main__":
    main()
