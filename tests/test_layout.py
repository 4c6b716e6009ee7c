"""Output that reads: in a narrow terminal or a CI log, in a browser at laptop widths, in a PR comment."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import nsync
from nsync import render_html, render_markdown
from nsync.render.figures import steps_figure, timeline_figure
from nsync.render.terminal.layout import CONTINUED, code_lines
from tests.browser import CHROMIUM, FLAGS, figures_of, needs_chromium
from tests.conftest import PROBE_LINES
from tests.test_cli import NSYNC, ROOT, run

DEG = ROOT / "fixtures/h200/print_deg.sqlite.xz"


def test_at_80_columns_a_fix_s_long_line_of_code_goes_on_below_it_marked_never_at_the_margin() -> None:
    """The demo's set-up line (92 columns at its indent) folded at the margin: its second half, a print(), read as
    a line of code of its own. Now it breaks at a space and goes on four columns further in, marked."""
    printed = subprocess.run(
        [*NSYNC, "analyze", str(DEG)], capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "80"},
    ).stdout.splitlines()  # fmt: skip
    at = printed.index("      once, before line 15:")
    assert printed[at + 1 : at + 3] == [
        "        printed = []  # print them once, after the loop:",
        f"            {CONTINUED}print(torch.stack(printed).tolist())",
    ]
    source = printed.index("    print(y.sum())           # SYNC: printing a CUDA tensor copies it to the")
    assert printed[source + 1] == f"        {CONTINUED}host"
    assert max(map(len, printed)) <= 80


@example(")(:)( (#))#a :::#):b):)b ", "", 8)  # a continued line with 2 columns of room was left whole, 24 wide
@given(
    st.text(st.sampled_from("ab( )#:\n"), max_size=300),
    st.sampled_from(["", "    ", "        "]),
    st.integers(min_value=1, max_value=120),
)
def test_code_lines_keep_every_character_and_the_width_where_it_can(text: str, indent: str, width: int) -> None:
    lines = code_lines(text, indent, width)
    kept = "".join(
        line.replace(CONTINUED, "", 1 if line.startswith(indent + "    " + CONTINUED) else 0) for line in lines
    )
    assert "".join(kept.split()) == "".join(text.split())
    if width >= len(indent) + 4 + len(CONTINUED) + 1:
        assert max((len(line) for line in lines), default=0) <= width


@pytest.mark.slow
@pytest.mark.parametrize("columns", [80, 120, 200])
def test_every_call_site_shows_its_line_its_cost_and_its_fix_at_any_width(columns: int) -> None:
    """Piped at 120 columns the table showed 4 of 10 columns and nothing said so; the source line never appeared."""
    result = subprocess.run(
        [*NSYNC, "analyze", str(ROOT / "fixtures/h200/p4.sqlite.xz")],
        capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "COLUMNS": str(columns)},
    )  # fmt: skip
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= columns
    assert not any(line != line.rstrip() for line in lines)  # no padding for a CI log to carry
    # probe.py's six call sites: each with its place, function and saving on one line (grep finds them in a
    # log), then its source line as written in fixtures/h200/probe.py, its figures and its fix
    # (or, where every column fits, one row of the table each: with its short fix, the first's in full below)
    code = (ROOT / "fixtures/h200/probe.py").read_text().splitlines()
    table = any(line.startswith("┃ # ┃") for line in lines)
    assert table == (columns == 200)
    for number, function in PROBE_LINES.items():
        if table:
            (row,) = [line for line in lines if re.match(rf"│ \d │ probe\.py:{number} +│", line)]
            cells = [cell.strip() for cell in row.split("│")]
            assert function in cells and code[number - 1].strip() in cells
            assert cells[cells.index(function) + 2]  # the fix, in a few words
            continue
        (first,) = [
            k for k, line in enumerate(lines) if re.match(rf"#\d probe\.py:{number}  {function}  saving ", line)
        ]
        block = " ".join(line.strip().removeprefix(CONTINUED) for line in lines[first + 1 : first + 8])
        assert " ".join(code[number - 1].split()) in " ".join(block.split())
        assert "exposed idle" in block and "host wait" in block and "fix (" in block
    assert not table or any(line.startswith("fix #1 probe.py:21 (copy between host and device") for line in lines)
    assert "warning" not in result.stdout and "no Python frames" not in result.stdout  # (stderr's)


def test_markdown_code_spans_are_literal_and_warnings_stay_apart(h200_analysis) -> None:
    import dataclasses

    analysis = h200_analysis("p2")  # one warning of its own (frames not exported), and a second one
    text = render_markdown(
        dataclasses.replace(analysis, warnings=[*analysis.warnings, nsync.Notice("unknown", "a second warning")])
    )
    assert "| `<unknown>:0` |" in text and "&lt;unknown" not in text
    quotes = [i for i, line in enumerate(text.splitlines()) if line.startswith("> ")]
    assert len(quotes) == 2 and quotes[1] - quotes[0] == 2  # a blank line between: two paragraphs


@pytest.mark.slow
def test_markdown_without_a_version_says_so(tmp_path: Path, h200) -> None:
    import shutil
    import sqlite3

    copy = tmp_path / "nov.sqlite"
    shutil.copy(h200("p4"), copy)
    with sqlite3.connect(copy) as conn:
        conn.execute("DELETE FROM META_DATA_EXPORT WHERE name = 'EXPORT_PRODUCT_VERSION'")
    result = run("analyze", copy, "--markdown", tmp_path / "r.md")
    assert result.returncode == 0, result.stderr
    facts = next(line for line in (tmp_path / "r.md").read_text().splitlines() if "NVIDIA H200" in line)
    assert "nsys ?" in facts and "None" not in facts


def _layout(page: Path, width: int) -> dict[str, float]:
    """Measurements taken by the page itself in Chromium at ``width`` px, written into the DOM."""
    probe = """<script>window.addEventListener('load', () => {
      const fix = document.querySelector('div.fix'), hit = document.querySelector('pre.src .hit');
      const out = {width: document.documentElement.clientWidth, scroll: document.documentElement.scrollWidth,
                   fix: fix ? fix.getBoundingClientRect().right : 0,
                   hit: hit ? hit.scrollWidth - hit.clientWidth : 0};
      document.body.setAttribute('data-layout', JSON.stringify(out));});</script></body>"""
    probed = page.with_name("probed-" + page.name)
    probed.write_text(page.read_text().replace("</body>", probe))
    done = subprocess.run(
        [CHROMIUM, *FLAGS, f"--window-size={width},900", f"--user-data-dir={page.parent / f'chrome-{width}'}",
         "--dump-dom", probed.as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    found = re.search(r"data-layout=\"([^\"]+)\"", done.stdout)
    assert found, done.stderr[-500:]
    return json.loads(found.group(1).replace("&quot;", '"'))


@pytest.mark.slow
@needs_chromium
@pytest.mark.parametrize("width", [900, 1280, 1400])
def test_the_report_fits_a_laptop_screen(h200_analysis, tmp_path: Path, width: int) -> None:
    page = tmp_path / "r.html"
    page.write_text(render_html(h200_analysis("p4"), nsync.RenderOptions(source_dirs=(ROOT / "fixtures/h200",))))
    measured = _layout(page, width)
    assert measured["scroll"] <= measured["width"]  # nothing sticks out sideways
    assert 0 < measured["fix"] <= measured["width"]  # the fix column is on the page
    assert measured["hit"] == 0  # the quoted source line is not clipped


def test_the_report_puts_the_saving_in_the_ranking_and_reds_only_real_idle(h200_analysis) -> None:
    page = render_html(h200_analysis("print_deg"))
    header = page.split('id="ranking"')[1].split("</thead>")[0]
    assert "what-if saving" in header
    assert 'class="card hot"' in page
    healthy = render_html(h200_analysis("print_ok"))
    assert 'class="card hot"' not in healthy  # 0.000 ms of exposed idle is not an alarm


def test_a_healthy_timeline_has_a_time_axis_and_the_step_chart_names_its_bars(h200_analysis) -> None:
    healthy = h200_analysis("print_ok")
    figure = timeline_figure(healthy.timeline)
    assert figure is not None and "ms from" in figure["layout"]["xaxis"]["title"]["text"]
    assert figure["layout"]["xaxis"]["anchor"] == "y"  # no lead panel without syncs: the axis under the lanes
    steps = steps_figure(healthy)
    assert steps is not None
    names = [trace["name"] for trace in steps["data"]]
    assert names[:2] == ["step on the host (NVTX range)", "step on the GPU"]


@pytest.mark.slow
def test_a_page_without_cuda_says_why_once(tmp_path: Path) -> None:
    from tests.tracebuilder import TraceBuilder

    b = TraceBuilder()
    b.api(1, "cudaGetDeviceProperties_v12000", 0, 5)
    result = run("analyze", b.write(tmp_path / "n.sqlite"), "--html", tmp_path / "n.html")
    assert result.returncode == 0
    page = (tmp_path / "n.html").read_text()
    assert page.count("no CUDA activity in this trace") == 1
    assert "figures cover the whole trace" not in page and 'id="headline"' not in page


def test_the_diff_panels_both_have_time_axes(h200_analysis) -> None:
    from nsync import render_html
    from nsync.comparison import diff

    page = render_html(diff(h200_analysis("print_ok"), h200_analysis("print_deg")))
    figures = figures_of(page)
    assert sorted(figures) == ["timeline-baseline", "timeline-candidate"]
    assert all("ms from" in f["layout"]["xaxis"]["title"]["text"] for f in figures.values())
    scales = {tuple(f["layout"]["xaxis"]["range"]) for f in figures.values()}
    assert len(scales) == 1  # one time scale for both


@pytest.mark.slow
def test_quiet_prints_the_verdict_alone_and_verbose_the_stacks() -> None:
    quiet = run("analyze", DEG, "-q")
    assert quiet.returncode == 0, quiet.stderr
    verdict = "verdict: fixing w_print.py:19 would save 0.44 ms per step (13.3 %; 80 % likely 0.27-0.61 ms)"
    assert quiet.stdout == verdict + "\n"
    assert quiet.stderr == ""
    verbose = run("analyze", DEG, "-v")
    assert "#1 w_print.py:19  step  saving 0.438 ms/step" in verbose.stdout
    assert "step (" in verbose.stdout and "w_print.py:19)" in verbose.stdout  # the stack's frames, each with its line


DEVICE_TREE_BYTES = 64 * 2**20  # what travels to the lent H200: the working tree, tracked files and all
LIBDW_BYTES = 800_000  # .libdw/ (libdw.so.1, libelf.so.1), carried beside it for nsys there (scripts/h200/env.sh)


def git(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)


def test_what_a_device_call_carries_leaves_room_for_libdw():
    """The fixtures' captures fill more than a device call can carry (docs/device-capture.md); with
    scripts/device-light.sh on they stay behind, and the rest (code, programs, logs) must leave room for .libdw,
    without which no capture runs on the H200."""
    tracked, captures = git("ls-files", "-z"), git("ls-files", "-z", "--", "fixtures/*.sqlite.xz")
    if tracked.returncode != 0:
        pytest.skip("not a git checkout")
    travels = set(tracked.stdout.split("\0")) - set(captures.stdout.split("\0"))
    sizes = [(ROOT / name).stat().st_size for name in travels if (ROOT / name).is_file()]
    assert sum(sizes) + LIBDW_BYTES <= DEVICE_TREE_BYTES


def test_device_light_takes_the_captures_out_of_what_travels_and_puts_them_back(tmp_path):
    """A clone: `on` leaves no capture tracked and every one ignored, the files in place; `off` leaves the
    checkout as it was."""
    if git("rev-parse", "HEAD").returncode != 0:
        pytest.skip("not a git checkout")
    clone = tmp_path / "clone"
    assert git("clone", "-q", str(ROOT), str(clone)).returncode == 0
    captures = git("ls-files", "--", "fixtures/*.sqlite.xz", cwd=clone).stdout.split()
    assert len(captures) > 50
    script = clone / "scripts/device-light.sh"
    assert subprocess.run([script, "on"], cwd=clone, capture_output=True, check=False).returncode == 0
    assert git("ls-files", "--", "fixtures/*.sqlite.xz", cwd=clone).stdout == ""
    ignored = git("ls-files", "--others", "--ignored", "--exclude-standard", "--", "fixtures", cwd=clone).stdout
    assert sorted(ignored.split()) == sorted(captures) and all((clone / c).is_file() for c in captures)
    assert subprocess.run([script, "off"], cwd=clone, capture_output=True, check=False).returncode == 0
    assert git("status", "--porcelain", "--ignored", cwd=clone).stdout == ""
