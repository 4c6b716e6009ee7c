"""One fix, several call sites (nsync.stages.advice.scopes): a statement's reads and a library's setting are
priced as the fix removes them, together, and the verdict names the fix, not a sync."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from nsync import analyze
from nsync.stages.advice import Advice, advise_code, read_code
from nsync.stages.advice.scopes import FixScope, fix_scopes
from tests.conftest import FIXTURES
from tests.tracebuilder import TraceBuilder

NSYNC = [str(Path(sys.executable).parent / "nsync")]

LOG_LINE = """
def step(model, x, log):
    loss, acc, peak = model(x)
    print(
        f"loss {loss.item():.3f} "
        f"acc {acc.item():.3f} "
        f"peak {peak.item():.2f}"
    )
"""  # lines 2-8: the print is lines 4-8, its reads on 5, 6 and 7


def _own_sites(path: Path, lines: list[int]) -> pd.DataFrame:
    rows = []
    for site_id, line in enumerate(lines):
        code = read_code(str(path), line)
        assert code is not None
        advice = advise_code(code, str(path))
        rows.append({"site_id": site_id, "file": str(path), "line": line, "sync_file": str(path),
                     "sync_line": line, "advice": advice, "count": 40})  # fmt: skip
    return pd.DataFrame(rows)


def test_the_reads_of_one_statement_over_three_lines_are_one_fix(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(LOG_LINE))
    assert fix_scopes(_own_sites(path, [5, 6, 7]), []) == [
        FixScope("statement", [0, 1, 2], "lines 4-8 of train.py", str(path), 4, 8)
    ]
    assert fix_scopes(_own_sites(path, [3, 5]), []) == []  # two statements: no scope (line 3 syncs nothing here)


def test_the_syncs_one_library_setting_turns_off_are_one_fix() -> None:
    def library(setup: str) -> Advice:
        return Advice("value read", "false", "turn it off", "checks", None, setup, "", "library")

    sites = pd.DataFrame(
        {
            "site_id": [0, 1, 2, 3],
            "file": ["train.py"] * 4,
            "line": [30, 30, 30, 31],
            "sync_file": [
                "/site-packages/torchmetrics/a.py",
                "/site-packages/torchmetrics/b.py",
                "train.py",
                "/site-packages/torch_geometric/c.py",
            ],
            "sync_line": [10, 20, 30, 5],
            "advice": [
                library("Metric(..., validate_args=False)"),
                library("Metric(..., validate_args=False)"),
                None,
                library("pass it: num_nodes=..."),
            ],
        }
    )
    assert fix_scopes(sites, []) == [FixScope("setting", [0, 1], "Metric(..., validate_args=False)")]


def test_a_log_line_of_three_reads_is_priced_and_named_as_one_fix(build, tmp_path: Path) -> None:
    """Per step (µs): a 600 µs kernel launched at 0-5; the print's three reads sync at 10 (waiting to 610), 615
    and 620 (the queue already drained: 3 µs each), then 370 µs of Python to the next step at 1000. Fixing one
    read leaves the next to wait for the kernel: next to nothing saved. Fixing the statement lets the host run
    its 390 µs beside the GPU's 600: the step becomes the GPU's 600 µs and a launch (607), 393 µs saved."""
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(LOG_LINE))
    b = TraceBuilder()
    for i in range(10):
        t0 = i * 1000
        b.nvtx_range(1, "step", t0, t0 + 999)
        b.kernel(1, t0, t0 + 7, t0 + 607, name="forward", launch_cost_us=5)
        for line, (start, end) in zip((5, 6, 7), ((10, 610), (615, 618), (620, 623))):
            sync = b.stream_sync(1, t0 + start, t0 + end)
            b.python_stack(1, sync, [("step", str(path), line), ("<module>", str(tmp_path / "run.py"), 9)])
    a = build(b, host_scale=1.0, host_scale_range=())
    (together,) = a.fix_scopes
    assert together.kind == "statement" and together.fix == "lines 4-8 of train.py"
    site_of = dict(zip(a.callsites["line"], a.callsites["site_id"]))
    alone = max(a.what_if.saving_ns[site_of[line]] for line in (5, 6, 7))
    saving = a.what_if.group_saving_ns[len(a.read_groups)]
    assert alone < 20_000 and abs(saving - 393_000) < 10_000
    assert a.verdict.worth_fixing and a.verdict.fix_scope == "statement"
    assert a.verdict.site == "train.py:5,6,7 (one statement, lines 4-8 of train.py)"


@pytest.mark.slow
def test_a_real_log_line_prints_its_rewrite_as_code_and_its_statement_as_one_fix() -> None:
    """fixtures/fresh11/timm_log_line: five .item() in one print over lines 32-36 (measured: the fix saved 1.52
    ms a step). Its rewrite is printed line by line (a line break in code is no control character to escape),
    the statement's sites once each, by line."""
    done = subprocess.run(
        [*NSYNC, "analyze", str(FIXTURES / "fresh11/timm_log_line.sqlite.xz"), "--source-dir",
         str(FIXTURES / "fresh"), "--top", "1"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "\\x0a" not in done.stdout and "`print(...)` formats a" in done.stdout
    assert "        if step % 100 == 0:\n            print(\n" in done.stdout
    together = "fix together: one statement (lines 32-36 of timm_log_line.py): timm_log_line.py:33,34,35;"
    assert together in " ".join(done.stdout.split())  # (wrapped at the terminal's width)


@pytest.mark.slow
def test_torchmetrics_bincount_is_a_sync_no_setting_removes() -> None:
    """fixtures/fresh11/tm_validate: the syncs are torch.bincount inside torchmetrics' _bincount
    (utilities/data.py:206), with validate_args on or off (measured: turning it off saved 0.000 ms a step). No
    verdict may name validate_args for them."""
    analysis = analyze(FIXTURES / "fresh11/tm_validate.sqlite.xz", source_dirs=[FIXTURES / "fresh"])
    assert not analysis.verdict.worth_fixing and not analysis.verdict.measure
    assert "the syncs inside torchmetrics (data.py:206)" in analysis.verdict.text
    (site,) = [s for s in analysis.callsites if s.sync_frame.line == 206]
    assert site.advice is not None and site.advice.setup == "" and "validate_args does not" in site.advice.caveat
