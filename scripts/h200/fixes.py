"""Issue 27's lab check: do nsync's suggested rewrites fix the lab scenarios? (fixtures/h200/README.md,
"The suggested fixes, applied and run")

    python scripts/h200/fixes.py prepare DIR    # here, with nsync installed: the patches, and the patched copies
    python scripts/h200/fixes.py run DIR OUT [SCENARIO...]   # on the H200: the checks and the timings (JSON lines)

``prepare`` analyses each scenario's degraded capture (fixtures/h200/cal, with its calibration) with
``nsync analyze --suggest-patch``, keeps the patch, and applies it with ``patch -p1`` to a copy of the
scenario: DIR/original holds the scenarios as they are, DIR/fixed the patched ones, DIR/*.patch the patches.

``run`` checks, for the original degraded mode, the patched degraded mode and the healthy mode, whether a step
run under ``torch.cuda.set_sync_debug_mode("error")`` raises (after three steps of warm-up: lazy set-up may
sync), and where; then times each scenario unprofiled with the harness's ``ab`` mode (blocks of 60 steps of
each mode, alternated in one process, 7 rounds): the patched degraded mode against the healthy one, and the
original degraded mode against the healthy one for the size of the effect the fix removes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import traceback
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ["w_print", "w_item", "w_mask", "w_tuple", "w_list", "w_two", "w_param"]


def prepare(folder: Path) -> None:
    lab = ROOT / "fixtures/h200"
    for name in ("original", "fixed"):
        (folder / name).mkdir(parents=True, exist_ok=True)
        shutil.copy(lab / "harness.py", folder / name)
    for scenario in SCENARIOS:
        for name in ("original", "fixed"):
            shutil.copy(lab / f"{scenario}.py", folder / name)
        trace = lab / "cal" / f"{scenario}_degraded.sqlite.xz"
        patch = (folder / f"{scenario}.patch").resolve()
        # run where the copy is: nsync finds the traced file by its name in the working directory
        subprocess.run(
            [sys.executable, "-m", "nsync", "analyze", str(trace), "--suggest-patch", str(patch), "-q"],
            cwd=folder / "fixed",
            check=True,
        )
        subprocess.run(["patch", "-p1", "-s", "-i", str(patch)], cwd=folder / "fixed", check=True)
        print(f"{scenario}: {patch}")


def _check(script: Path, mode: str) -> dict[str, object]:
    """Run the scenario's step under the sync debug mode 'error': where it raised, if it did."""
    import torch

    result: dict[str, object] = {"scenario": script.stem, "mode": mode, "script": script.parent.name}

    def run(workload: str, mode_: str, step: object) -> None:
        for _ in range(3):
            step()  # type: ignore[operator]
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            for _ in range(3):
                step()  # type: ignore[operator]
            result["synced"] = False
        except RuntimeError as error:
            frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == str(script)]
            result["synced"] = True
            result["at"] = f"{script.name}:{frames[-1].lineno}" if frames else "?"
            result["error"] = str(error).splitlines()[0][:200]
        finally:
            torch.cuda.set_sync_debug_mode(0)
            torch.cuda.synchronize()

    harness = types.ModuleType("harness")
    harness.run = run  # type: ignore[attr-defined]
    sys.modules["harness"] = harness
    sys.argv = [str(script), mode]
    code = compile(script.read_text(), str(script), "exec")
    exec(code, {"__name__": "__main__", "__file__": str(script)})
    return result


def run_all(folder: Path, out: Path, scenarios: list[str]) -> None:
    folder = folder.resolve()
    with (out / "fixes-checks.jsonl").open("w") as checks:
        for scenario in scenarios:
            for kind, mode in (("original", "degraded"), ("fixed", "degraded"), ("fixed", "healthy")):
                script = folder / kind / f"{scenario}.py"
                found = subprocess.run(
                    [sys.executable, __file__, "check", str(script), mode], capture_output=True, text=True
                )
                line = next((x for x in found.stdout.splitlines() if x.startswith("{")), None)
                checks.write((line or json.dumps({"scenario": scenario, "mode": mode, "script": kind,
                                                  "failed": found.stderr[-400:]})) + "\n")  # fmt: skip
                checks.flush()
    with (out / "fixes-timings.log").open("w") as log:
        for scenario in scenarios:
            for kind in ("fixed", "original"):
                done = subprocess.run(
                    [sys.executable, f"{scenario}.py", "ab", "healthy,degraded"],
                    cwd=folder / kind,
                    capture_output=True,
                    text=True,
                )
                for line in done.stderr.splitlines():
                    if line.startswith("RESULT "):
                        data = json.loads(line[len("RESULT ") :])
                        data["script"] = kind
                        log.write(json.dumps(data) + "\n")
                        log.flush()
                if done.returncode:
                    log.write(json.dumps({"workload": scenario, "script": kind, "failed": done.stderr[-400:]}) + "\n")


if __name__ == "__main__":
    verb = sys.argv[1]
    if verb == "prepare":
        prepare(Path(sys.argv[2]))
    elif verb == "run":
        run_all(Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4:] or SCENARIOS)
    elif verb == "check":
        print(json.dumps(_check(Path(sys.argv[2]), sys.argv[3])), flush=True)
    else:
        sys.exit(__doc__)
