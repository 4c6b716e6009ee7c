"""HTML report (in real headless Chromium) and Markdown summary."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import numpy as np
import pytest

import nsync
from nsync import AnalysisConfig, analyze, render_html, render_markdown
from nsync.render.figures import timeline_figure
from nsync.report.timeline import Timeline
from nsync.stages.activity import GpuActivity, exposed_spans, gpu_activity, gpu_utilisation
from tests.browser import load, needs_chromium
from tests.test_real_nsys import needs_nsys
from tests.tracebuilder import TraceBuilder

EVIL = "</script><script>document.title='PWNED'</script><img src=x onerror=\"document.body.dataset.pwned=1\">'\""


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "h200"


def write_report(analysis, path: Path) -> Path:
    path.write_text(render_html(analysis, nsync.RenderOptions(source_dirs=(FIXTURES,))), encoding="utf-8")
    return path


@pytest.mark.slow
@needs_chromium
def test_print_deg_report_renders_in_chromium_with_the_print_first(h200_analysis, tmp_path):
    page = write_report(h200_analysis("print_deg"), tmp_path / "report.html")
    size = page.stat().st_size
    assert size < 1_000_000  # plotly.js's basic bundle gzipped (0.53 MB in base64), the rest is small
    assert not re.search(r"<script[^>]*\bsrc=", page.read_text())  # nothing fetched: works offline
    dom, console = load(page)
    assert console == []
    first = re.search(r'<tr class="site">.*?<code class="where">(.*?)</code>', dom, re.S)
    assert first and first.group(1) == "w_print.py:19"
    timeline = re.search(r'<div id="timeline".*?</div>', dom, re.S)
    assert timeline and 'class="main-svg"' in dom[timeline.start() :]  # plotly drew it
    assert 'id="steps"' in dom
    assert "print(y.sum())" in dom  # the source line, read from fixtures/h200/w_print.py


def hostile_trace(tmp_path: Path) -> Path:
    b = TraceBuilder()
    b.thread_name(1, f"worker{EVIL}")
    for i in range(5):
        t0 = i * 1000
        b.nvtx_range(1, f"step{EVIL}", t0, t0 + 999)
        b.kernel(1, t0, t0 + 10, t0 + 600, name=f"gemm{EVIL}")
        corr = b.stream_sync(1, t0 + 100, t0 + 610)
        b.python_stack(1, corr, [(f"fn{EVIL}", f"/home/u/{EVIL}/train.py", 7)])
        b.kernel(1, t0 + 700, t0 + 700, t0 + 900, name="tail")
    return b.write(tmp_path / "evil.sqlite")


@pytest.mark.slow
@needs_chromium
def test_hostile_strings_are_escaped_everywhere(tmp_path):
    analysis = analyze(hostile_trace(tmp_path))
    assert analysis.steps.source.startswith("nvtx:step</script><script>")
    page = write_report(analysis, tmp_path / "evil.html")
    dom, console = load(page)
    assert console == []
    assert "PWNED" not in re.search(r"<title>(.*?)</title>", dom, re.S).group(1)
    assert "data-pwned" not in dom
    assert '<img src="x"' not in dom and "<img src=x" not in dom
    assert "fn&lt;/script&gt;&lt;script&gt;document.title='PWNED'" in dom  # shown as text
    assert 'class="main-svg"' in dom  # and the page still renders its figures
    markdown = render_markdown(analysis)
    assert "<script>" not in markdown and "<img" not in markdown


@pytest.mark.slow
@needs_chromium
def test_report_without_python_frames_says_why(tmp_path):
    b = TraceBuilder(schema="2022.4")
    b.kernel(1, 0, 10, 1010, name="k1")
    b.stream_sync(1, 20, 1015)
    b.kernel(1, 1100, 1110, 3000, name="k2")
    analysis = analyze(b.write(tmp_path / "old.sqlite"))
    dom, console = load(write_report(analysis, tmp_path / "old.html"))
    assert console == []
    assert "cannot record Python backtraces" in dom
    assert "from none" in dom  # the stack's source is named in each row


@pytest.mark.slow
@needs_nsys
@needs_chromium
def test_report_of_a_trace_without_cuda_says_so(cpu_only_export, tmp_path):
    analysis = analyze(cpu_only_export)
    dom, console = load(write_report(analysis, tmp_path / "cpu.html"))
    assert console == []
    assert 'id="no-callsites"' in dom and 'id="no-timeline"' in dom
    assert "no CUDA activity in this trace" in dom


def test_markdown_summary_is_a_compact_pr_table(tmp_path):
    b = TraceBuilder()
    for i in range(5):
        t0 = i * 1000
        b.nvtx_range(1, "step", t0, t0 + 999)
        b.kernel(1, t0, t0 + 10, t0 + 600, name="matmul")
        corr = b.stream_sync(1, t0 + 100, t0 + 612)
        b.python_stack(1, corr, [("train_step", "/home/u/proj/train.py", 42)])
        b.kernel(1, t0 + 700, t0 + 700, t0 + 900, name="tail")
    path = b.write(tmp_path / "run.sqlite")
    text = render_markdown(analyze(path, AnalysisConfig(host_scale=1.0, host_scale_range=(1.0, 1.0))))
    # per step: GPU idle [0,10] + [600,700] + [900,999] = 209 µs; each sync drains at 600 and the lead is
    # rebuilt at the next matmul's launch end (+1004): 100 + 104 = 204 µs; the last sync's window ends with
    # the last step (+999): 100 + 99 = 199 µs. (204 * 3 + 199) / 4 = 202.75.
    # What-if (host time as captured): launch latency = median of the matmuls' 10 µs and the tails' 0 µs = 5.
    # As it is, a step replays as 590 + 5 + 12 (the sync's return) + 93 (Python) + 200 + 95 = 995 µs; with the
    # sync released the host runs 500 µs a step ahead, and the GPU's 590 + 200 = 790 µs set the step: saving
    # 205 µs, 20.6 % of 995. Steps 1-4 are analysed: step 0 (with a sync) is start-up, 1000 µs long, its
    # GPU idle 10 + 100 + 100 = 210 (21 %); the main loop [1000, 4999] idles 3 * 210 + 209 = 839 µs (21 %).
    # The saving's 80 % likely range, uncalibrated, is exp(-0.496) to exp(0.336) times it (LOG_RATIO_QUANTILES):
    # 124.9-286.8 µs.
    assert text == (
        "### nsync: run.sqlite\n\n"
        "**fixing train.py:42 would save 0.20 ms per step (20.6 %; 80 % likely 0.12-0.29 ms)**\n\n"
        "Synthetic GPU · nsys 2025.3.2.0 · 4 steps, median 0.999 ms · GPU idle 0.209 ms/step, "
        "0.203 ms/step exposed after syncs\n\n"
        "| # | call site | what-if saving ms/step | syncs/step | exposed idle ms/step | host wait ms/step | fix |\n"
        "|---:|---|---:|---:|---:|---:|---|\n"
        "| 1 | `train.py:42` | 0.205 (0.125-0.287) | 1.00 | 0.203 | 0.512 | wait later, on an event |\n"
        "\n"
        "| phase | time ms | GPU idle | syncs | host wait ms |\n"
        "|---|---:|---:|---:|---:|\n"
        "| start-up | 1.0 | 21 % | 1 | 0.512 |\n"
        "| main loop | 4.0 | 21 % | 4 | 2.048 |\n"
        "\n"
        "Syncs outside the main loop, once each: the host's wait in them is the most they cost.\n"
        "\n"
        "| phase | call site | syncs | host wait ms |\n"
        "|---|---|---:|---:|\n"
        "| start-up | `train.py:42` | 1 | 0.512 |\n"
    )


def _activity(ops: list[tuple[int, int]], windows: list[tuple[int, int]], span: tuple[int, int]) -> GpuActivity:
    """One GPU's ``ops`` and the syncs' exposed-idle ``windows`` over ``span`` (nsync.stages.activity)."""
    start, end = (np.array([op[k] for op in ops], np.int64) for k in (0, 1))
    opened, closed = (np.array([w[k] for w in windows], np.int64) for k in (0, 1))
    return gpu_activity(start, end, np.zeros(len(ops), np.int64), span, (opened, closed))


def _timeline(ops: list[tuple[int, int]], windows: list[tuple[int, int]], span: tuple[int, int]) -> Timeline:
    from nsync.report.timeline import TimelineCalls, TimelineLead, TimelineOps, TimelineSyncs

    n, k = len(ops), len(windows)
    activity = _activity(ops, windows, span)
    return Timeline(
        span[0], span[1], "a slice", None,
        TimelineOps([a for a, _ in ops], [b for _, b in ops], ["GPU 0 · stream 7"] * n, ["kernel"] * n, ["k"] * n,
                    [0] * n),
        TimelineCalls([], [], [], []),
        TimelineSyncs([a - 5 for a, _ in windows], [a for a, _ in windows], ["t"] * k, ["stream"] * k,
                      [a for a, _ in windows], [b for _, b in windows], [0] * k, [f"a.py:{i}" for i in range(k)],
                      ["f"] * k),
        TimelineLead([], [], []),
        exposed=exposed_spans(activity),
        utilisation=gpu_utilisation(activity, *span),
    )  # fmt: skip


def test_gpu_activity_splits_idle_by_the_window_that_began_last() -> None:
    """Kernels [0,10] [5,20] [30,40] in [0,50]: busy [0,20] and [30,40]. Windows A [15,35] and B [25,45]: idle
    [20,25] is A's, [25,30] and [40,45] B's (it began last), [45,50] no sync's."""
    activity = _activity([(0, 10), (5, 20), (30, 40)], [(15, 35), (25, 45)], (0, 50))
    columns = (activity.start_ns, activity.end_ns, activity.busy, activity.sync)
    assert list(zip(*(column.tolist() for column in columns))) == [
        (0, 20, True, -1), (20, 25, False, 0), (25, 30, False, 1), (30, 40, True, -1), (40, 45, False, 1),
        (45, 50, False, -1),
    ]  # fmt: skip


def test_the_gpu_panel_draws_every_exposed_idle_span_however_many() -> None:
    """1000 steps of 100 ns: a kernel [0,30], a sync's window over [30,80], idle to 100. Before, the shading
    stopped at 300 windows; the panel's orange now holds all 1000 (50 % of the time) and its dark 30 %."""
    ops = [(100 * i, 100 * i + 30) for i in range(1000)]
    windows = [(100 * i + 30, 100 * i + 80) for i in range(1000)]
    use = gpu_utilisation(_activity(ops, windows, (0, 100_000)), 0, 100_000, bins=200)
    assert use.exposed == [0.5] * 200 and use.busy == [0.3] * 200
    assert use.sync == [5 * b + 2 for b in range(200)]  # the window over each bin's middle (its step's +50 ns)
    figure = timeline_figure(_timeline(ops, windows, (0, 100_000)))
    assert figure is not None
    (orange,) = [t for t in figure["data"] if t["name"] == "GPU idle after a sync"]
    assert sum(orange["y"][:-1]) / (len(orange["y"]) - 1) == pytest.approx(50, abs=0.5)  # bins of 66.7 ns


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [
        "h200/print_deg",
        "h200/w_item_degraded",
        "real/timm_gradnorm",
        "real/hf_trainer",
        "real/resnet_train",
        "real/lstm_lm",
        "real/compiled_train",
    ],
)
def test_every_report_is_at_most_1_5_mb_and_renders_in_seconds(name: str, h200, real) -> None:
    """plotly's whole bundle made every report 4.8-5.8 MB, and a shape per exposed-idle window made timm's take
    56-104 s to render."""
    import time

    folder, stem = name.split("/")
    report = analyze((h200 if folder == "h200" else real)(stem))
    started = time.perf_counter()
    page = render_html(report)
    assert time.perf_counter() - started < 15
    assert len(page.encode()) <= 1_500_000


@pytest.mark.slow
@needs_chromium
def test_the_busiest_timeline_and_its_step_chart_are_drawn_in_chromium(real, tmp_path) -> None:
    page = tmp_path / "timm.html"
    page.write_text(render_html(analyze(real("timm_gradnorm"))), encoding="utf-8")
    dom, console = load(page)
    assert console == []
    for chart in ("timeline", "steps"):
        drawn = re.search(rf'<div id="{chart}" class="chart[^"]*"[^>]*>(.*?)</svg>', dom, re.S)
        assert drawn and 'class="main-svg"' in drawn.group(1), chart
    assert "timm_gradnorm.py:30" in dom  # the longest idle after a sync is named on the chart


@pytest.mark.slow
def test_one_line_of_several_sites_is_shown_once_and_nothing_worth_fixing_spells_out_no_fix():
    """issue 47: the Trainer's five library syncs sit under one line of the program (hf_trainer.py:34): the HTML
    showed its excerpt five times; its Markdown, whose verdict is "nothing worth fixing", listed Fix #1-#3."""
    real = Path(__file__).parents[1] / "fixtures/real"
    result = analyze(real / "hf_trainer.sqlite.xz", source_dirs=[real])
    assert [(Path(s.file).name, s.line) for s in result.callsites].count(("hf_trainer.py", 34)) == 5
    html = render_html(result, nsync.RenderOptions(source_dirs=(real,)))
    assert html.count('<pre class="src">') == 2 and html.count("source: the line of #1") == 4
    assert not result.verdict.worth_fixing and not result.verdict.measure
    markdown = render_markdown(result)
    assert "#### Fix #" not in markdown and "No fix is spelled out here" in markdown
    from nsync.render.markdown import cell

    assert cell("the step's <b>") == "the step's &lt;b&gt;"  # (an apostrophe needs no escape in Markdown, HTML does)


# written into the page by the test: where each headline card sits, once the page has laid out
CARD_ROWS = (
    "<script>addEventListener('load', () => document.body.setAttribute('data-card-rows', JSON.stringify("
    "[...document.querySelectorAll('#headline .card')].map((card) => card.offsetTop))))</script>"
)


@pytest.mark.slow
@needs_chromium
def test_at_1280_pixels_the_verdicts_saving_is_the_first_card_and_the_charts_lose_their_note(h200_analysis, tmp_path):
    """issue 47: the headline saving sat on the second row at 1280 px; a chart was blank, with no word, until
    its script ran."""
    page = write_report(h200_analysis("print_deg"), tmp_path / "report.html")
    before = page.read_text()
    assert before.count("The chart draws once its script runs") == 2  # what a reader without JavaScript sees
    page.write_text(before.replace("</body>", CARD_ROWS + "</body>"))
    dom, console = load(page, "--window-size=1280,900")
    assert console == []
    first = re.search(r'<section class="cards" id="headline">.*?<div class="k">(.*?)</div>', dom, re.S)
    assert first and first.group(1).startswith("what the verdict's fix saves per step")
    rows = json.loads(html.unescape(re.search(r'data-card-rows="([^"]*)"', dom).group(1)))
    assert rows[0] == min(rows)
    assert "The chart draws once its script runs" not in dom  # drawn: the note went
