"""The rows of fixtures/kineto/h100/both-ways.tsv from what `scripts/h200/torch-backend.sh` brought back, on this
machine: each NAME.json (torch.profiler) and NAME_nsys.json (nsys) that `nsync profile --json` wrote, one row
each, with each verdict's line on stderr to read beside it.

    tar xf torch-backend.tar && python scripts/both_ways_rows.py t >> fixtures/kineto/h100/both-ways.tsv
"""

from __future__ import annotations

import sys
from pathlib import Path

import nsync


def _ms(value: float | None) -> str:
    return "" if value is None else f"{round(value, 3)}"


def row(name: str, analysis: nsync.Analysis) -> list[str]:
    """program, backend, site, worth_fixing, saving_ms, low_ms, high_ms, profiled_step_ms, unprofiled_step_ms,
    host_scale: the columns of both-ways.tsv."""
    verdict, what_if = analysis.verdict, analysis.what_if
    assert verdict is not None
    backend = "nsys" if name.endswith("_nsys") else "torch"
    return [
        name.removesuffix("_nsys"), backend, verdict.site, str(verdict.worth_fixing),
        _ms(verdict.largest_saving_ms_per_step), _ms(verdict.largest_saving_ms_per_step_low),
        _ms(verdict.largest_saving_ms_per_step_high), _ms(analysis.steps.median_ms),
        _ms(what_if.unprofiled_step_ms if what_if else None), f"{round(what_if.host_scale, 4)}" if what_if else "",
    ]  # fmt: skip


def main() -> None:
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_dir():
        sys.exit("usage: python scripts/both_ways_rows.py FOLDER (torch-backend.tar's t/, unpacked)")
    for path in sorted(Path(sys.argv[1]).glob("*.json")):
        if not path.name.endswith(".calibration.json"):
            analysis = nsync.load_result(path)
            if not isinstance(analysis, nsync.Analysis) or analysis.verdict is None:  # (no CUDA, no steps...)
                print(f"{path.stem}: no verdict to compare", file=sys.stderr)
                continue
            print("\t".join(row(path.stem, analysis)))
            print(f"{path.stem}: {analysis.verdict.text}", file=sys.stderr)


if __name__ == "__main__":
    main()
