"""What the commands do, the library does: each command is a public function, and nsync.write renders any
report into a file by its suffix. Expected content from fixtures/h200/README.md (print_deg: the print at
w_print.py:19 is the one sync worth fixing)."""

from __future__ import annotations

import inspect
import json
import sqlite3

import pytest

import nsync
from nsync.errors import UsageError


def test_every_command_is_a_function_of_the_library_even_once_its_module_is_imported() -> None:
    import nsync.capturing.profile
    import nsync.comparison
    import nsync.ranks  # a submodule named as a function would shadow it

    for name in ("analyze", "diff", "analyze_ranks", "profile", "write"):
        assert inspect.isfunction(getattr(nsync, name)), name
        assert name in nsync.__all__
    assert inspect.ismodule(nsync.gates)


@pytest.mark.slow
def test_write_picks_the_format_by_suffix(tmp_path, h200_analysis) -> None:
    analysis = h200_analysis("print_deg")
    data = json.loads(nsync.write(analysis, tmp_path / "r.json").read_text())
    assert data["schema"] == "nsync.analysis/2" and data["callsites"][0]["line"] == 19
    assert "`w_print.py:19`" in nsync.write(analysis, tmp_path / "r.md").read_text()
    assert nsync.write(analysis, tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    with sqlite3.connect(nsync.write(analysis, tmp_path / "r.db")) as db:
        assert db.execute("select count(*) from syncs").fetchone()[0] == len(analysis.tables.syncs)
    named = nsync.write(analysis, tmp_path / "r.txt", format="json")
    assert json.loads(named.read_text())["schema"] == "nsync.analysis/2"


def test_write_refuses_what_it_cannot_tell_or_hold(tmp_path, h200_analysis) -> None:
    """A suffix that names no format; a database of a result read back from JSON (it has no syncs), or of a diff:
    one line each, and no file."""
    analysis = h200_analysis("print_deg")
    with pytest.raises(UsageError, match="which format"):
        nsync.write(analysis, tmp_path / "r.txt")
    saved = nsync.Analysis.load(nsync.write(analysis, tmp_path / "r.json"))
    with pytest.raises(UsageError, match="the database holds every sync, which a result read back from JSON does not"):
        nsync.write(saved, tmp_path / "r.db")
    change = nsync.diff(analysis, analysis)
    with pytest.raises(UsageError, match=r"^a diff result has no database: the database holds every sync of one"):
        nsync.write(change, tmp_path / "d.db")
    assert not (tmp_path / "r.db").exists() and not (tmp_path / "d.db").exists()


def test_a_diff_is_written_as_its_own_report(tmp_path, h200_analysis) -> None:
    change = nsync.diff(h200_analysis("print_ok"), h200_analysis("print_deg"))
    data = json.loads(nsync.write(change, tmp_path / "d.json").read_text())
    assert (data["schema"], data["verdict"]) == ("nsync.diff/1", "regression")
    assert nsync.write(change, tmp_path / "d.md").read_text().startswith("### nsync diff: ")


def test_messages_name_the_api_until_the_command_line_names_its_flags(monkeypatch, h200) -> None:
    """The command line says once which names its users read (nsync.settings); no message is rewritten."""
    from nsync import settings

    monkeypatch.setattr(settings, "_NAMES", {})
    config = nsync.AnalysisConfig(warmup_steps=1000)
    with pytest.raises(UsageError, match=r"cannot skip 1000 warm-up steps \(AnalysisConfig.warmup_steps\)"):
        nsync.analyze(h200("print_deg"), config)
    settings.name_settings({"AnalysisConfig.warmup_steps": "--warmup-steps"})
    with pytest.raises(UsageError, match=r"cannot skip 1000 warm-up steps \(--warmup-steps\)"):
        nsync.analyze(h200("print_deg"), config)


@pytest.mark.slow
def test_every_report_reads_back_as_it_was_written(tmp_path, h200_analysis, real_analysis) -> None:
    """Each report's reader is its JSON writer's inverse: written, read, and written again, the same bytes
    (a diff with both runs calibrated carries the unprofiled step times too)."""

    for change in (
        nsync.diff(h200_analysis("print_ok"), h200_analysis("print_deg")),
        nsync.diff(real_analysis("timm_gradnorm_healthy"), real_analysis("timm_gradnorm")),
    ):
        first = nsync.write(change, tmp_path / "d.json").read_text()
        assert nsync.render_json(nsync.Diff.load(tmp_path / "d.json")) == first
    assert '"unprofiled_baseline"' in first
    report = h200_analysis("p2")
    ranks = nsync.Ranks(
        "nsync.ranks/2", [], 0, [0.0], 0.0, [], "none", False, [nsync.Notice("unknown", "w")], [report, report]
    )
    written = nsync.write(ranks, tmp_path / "r.json").read_text()
    assert nsync.render_json(nsync.Ranks.load(tmp_path / "r.json")) == written
    with pytest.raises(nsync.TraceError, match="not an nsync diff"):
        nsync.Diff.load(tmp_path / "r.json")


# What each command's result can be written as (the contract of nsync.write: every other pair is refused in one line)
SUPPORTED = {
    "Analysis": {"json", "markdown", "html", "db", "patch", "switch", "text"},
    "Diff": {"json", "markdown", "html", "text"},
    "Ranks": {"json", "markdown", "text"},
    "Measurement": {"json", "markdown", "text"},
}
SIGNS = {  # what each written format begins with, or holds
    "json": '{\n  "schema": "nsync.',
    "markdown": "### nsync",
    "html": "<!DOCTYPE html>",
    "patch": "# nsync's suggested rewrites",
    "switch": "# nsync's suggested rewrites",
}


def _measurement() -> nsync.Measurement:
    import numpy as np

    from nsync.measuring.change import change_between, measured_command
    from nsync.report.measurement import SCHEMA

    a = measured_command("A", ["python3", "a.py"], [np.array([10.0, 10.2]), np.array([9.9, 10.1])])
    b = measured_command("B", ["python3", "b.py"], [np.array([8.0, 8.1]), np.array([8.2, 8.0])])
    change, verdict = change_between(a.run_median_step_ms, b.run_median_step_ms)
    return nsync.Measurement(SCHEMA, verdict, "marks", ["A", "B", "B", "A"], a, b, change)


def test_every_result_is_written_in_every_format_it_holds_and_refused_in_one_line_in_the_others(
    tmp_path, h200_analysis
) -> None:
    analysis = h200_analysis("print_deg")
    results = {
        "Analysis": analysis,
        "Diff": nsync.diff(h200_analysis("print_ok"), analysis),
        "Ranks": nsync.Ranks("nsync.ranks/2", [], 0, [0.0], 0.0, [], "none", False, [], [analysis]),
        "Measurement": _measurement(),
    }
    options = nsync.RenderOptions(source_dirs=(tmp_path,))
    for name, result in results.items():
        for format in ("json", "markdown", "html", "db", "patch", "switch", "text"):
            path = tmp_path / f"{name}.{format}"
            if format in SUPPORTED[name]:
                nsync.write(result, path, format, options)
                if format == "db":
                    with sqlite3.connect(path) as db:
                        assert db.execute("select count(*) from syncs").fetchone()[0] == len(analysis.tables.syncs)
                else:
                    assert path.read_text().startswith(SIGNS.get(format, "")), (name, format)
                continue
            with pytest.raises(UsageError) as refused:
                nsync.write(result, path, format, options)
            assert "\n" not in str(refused.value) and not path.exists(), (name, format)
            assert str(refused.value).startswith(f"a {name.lower()} result has no "), str(refused.value)
    saved = nsync.load_result(nsync.write(results["Measurement"], tmp_path / "m.json"))
    assert saved == results["Measurement"]  # each result reads back as it was written (the others: test_saved_result)
