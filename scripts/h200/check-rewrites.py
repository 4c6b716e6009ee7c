"""Apply nsync's rewrites of real syncing lines in the libraries themselves, and run the programs again (issue 43).

For each program of scripts/h200/harvest-syncs.py named (or of each set named: held-out-3, held-out-4, ...):
run it under nsync.testing.sync_free in a fresh process and note every syncing line; ask nsync for each line's
advice as a user would get it (nsync.testing's reading of the line in its file); write every rewrite nsync
gives into the library's installed file (a backup kept, restored afterwards, whatever happens); run the
program again in a fresh process, and count the syncs left at each rewrite's lines. A rewrite passes when the
program still runs (each of its calls that ran before: a program runs its calls one by one, passing over one that
fails) and no sync is left at its lines; one that breaks the program, or a call of it, or still syncs is said.
Writes $OUT/rewrites.json. Run on a CUDA machine from the repository root:

    python scripts/h200/check-rewrites.py held-out-3 held-out-4
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
HARVEST = Path(__file__).with_name("harvest-syncs.py")
RUN_S = 200


def _harvest_module():
    spec = importlib.util.spec_from_file_location("harvest_syncs", HARVEST)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def child(name: str) -> None:
    """Run one program (once to warm up, once under sync_free) and print, as JSON on the last line, its syncs and
    the calls of it that failed (a program runs its calls one by one, each failure said and passed over)."""
    import torch
    from harvest_each import FAILED

    from nsync.testing import SyncFound, sync_free

    program = next(p for p in _harvest_module().ALL if p.__name__ == name)
    program()
    torch.cuda.synchronize()
    FAILED.clear()  # the timed run's alone
    syncs: Counter = Counter()
    try:
        with sync_free():
            program()
    except SyncFound as found:
        syncs.update((s.file, s.line, s.code) for s in found.syncs)
    print(json.dumps({"syncs": [[file, line, code, n] for (file, line, code), n in syncs.items()], "failed": FAILED}))


def run(name: str) -> dict | str:
    """The program's syncs ([file, line, code, count]) and failed calls, or why it did not run to its end."""
    try:
        done = subprocess.run([sys.executable, __file__, "--child", name], capture_output=True, text=True,
                              timeout=RUN_S, cwd=ROOT, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})  # fmt: skip
    except subprocess.TimeoutExpired:
        return f"did not end in {RUN_S} s"
    if done.returncode != 0:
        return f"exit {done.returncode}: " + " | ".join(done.stderr.strip().splitlines()[-3:])[-600:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _installed(file: str) -> bool:
    return "site-packages" in Path(file).parts or "dist-packages" in Path(file).parts


def rewrites_of(syncs: list) -> dict[str, list[dict]]:
    """nsync's rewrite of each syncing line in an installed library, by file."""
    from nsync.stages.advice import advise_code, read_code

    by_file: dict[str, list[dict]] = {}
    for file, line, code, count in syncs:
        parsed = read_code(file, line) if _installed(file) else None
        if parsed is None:
            continue
        advice = advise_code(parsed, file)
        if advice.rewrite is None:
            continue
        edits = [(advice.first_line, advice.last_line, advice.rewrite.splitlines())]
        if advice.setup and advice.setup_line:
            edits.append((advice.setup_line, advice.setup_line - 1, advice.setup.splitlines()))
        by_file.setdefault(file, []).append(
            {"line": line, "code": code, "count_before": count, "pattern": advice.pattern, "edits": edits,
             "rewrite": advice.rewrite, "setup": advice.setup}  # fmt: skip
        )
    return by_file


def apply(by_file: dict[str, list[dict]]) -> dict[str, str]:
    """Write the rewrites into their files; the files' original texts, to restore."""
    from nsync.render.patch import _apply

    originals: dict[str, str] = {}
    for file, rewrites in by_file.items():
        text = Path(file).read_text()
        changes = [(f"{file}:{r['line']}", r["pattern"], r["edits"]) for r in rewrites]
        changed, said = _apply(text.splitlines(), changes)
        for rewrite, note in zip(rewrites, said):
            rewrite["applied"] = "not applied" not in note
        originals[file] = text
        Path(file).write_text("\n".join(changed) + "\n")
    return originals


def left_at(rewrite: dict, file: str, syncs: list) -> int:
    """Syncs after the change at the rewrite's own lines (found by their text in the changed file)."""
    mine = {line.strip() for line in rewrite["rewrite"].splitlines() if line.strip()}
    return sum(n for f, _line, code, n in syncs if f == file and code.strip() in mine)


def _each_program(names: list[str]) -> dict[str, list | str]:
    """Every program run at once, each in its own process (they share the GPU; none changes a file)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(8) as pool:
        return dict(zip(names, pool.map(run, names)))


def main(names: list[str]) -> None:
    """Before, the rewrites of every program's lines written at once (a line two programs share, once), after."""
    programs = [p.__name__ for p in _harvest_module().chosen_programs(names)]
    before = _each_program(programs)
    lines = {(f, line): [f, line, code, 0] for ran in before.values() if isinstance(ran, dict)
             for f, line, code, _n in ran["syncs"]}  # fmt: skip
    by_file = rewrites_of(list(lines.values()))
    originals = apply(by_file)
    print(f"{sum(map(len, by_file.values()))} rewrites written in {len(by_file)} files", flush=True)
    try:
        after = _each_program(programs)
    finally:
        for file, text in originals.items():
            Path(file).write_text(text)
    results = {}
    for name in programs:
        if isinstance(before[name], str):
            results[name] = {"error_before": before[name]}
            continue
        was = before[name]["syncs"]
        now = after[name] if isinstance(after[name], str) else after[name]["syncs"]
        # a call that failed after and not before: a rewrite broke it, and the lines after it did not run
        broken = [] if isinstance(after[name], str) else sorted(set(after[name]["failed"]) - set(before[name]["failed"]))
        mine = {(f, line): n for f, line, _code, n in was}
        rewrites = [dict(r, file=f, count_before=mine[(f, r["line"])]) for f, written in by_file.items()
                    for r in written if (f, r["line"]) in mine]  # fmt: skip
        for rewrite in rewrites:
            rewrite.pop("edits", None)
            rewrite["left_after"] = None if isinstance(now, str) else left_at(rewrite, rewrite["file"], now)
        results[name] = {"syncing_lines": len(was), "syncs_before": sum(n for *_, n in was),
                         "error_after": now if isinstance(now, str) else None, "calls_broken": broken,
                         "syncs_after": None if isinstance(now, str) else sum(n for *_, n in now),
                         "after": None if isinstance(now, str) else now, "rewrites": rewrites}  # fmt: skip
        print(f"{name}: {len(rewrites)} rewrites; syncs {results[name]['syncs_before']} before, after: "
              f"{results[name]['error_after'] or results[name]['syncs_after']}"
              + (f"; calls broken: {' | '.join(broken)}" if broken else ""), flush=True)  # fmt: skip
    (Path(os.environ.get("OUT", ".")) / "rewrites.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2])
    else:
        main(sys.argv[1:])
