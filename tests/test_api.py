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
    import nsync.comparison
    import nsync.profiling
    import nsync.ranks  # a submodule named as a function would shadow it

    for name in ("analyze", "diff", "analyze_ranks", "profile", "write"):
        assert inspect.isfunction(getattr(nsync, name)), name
        assert name in nsync.__all__
    assert inspect.ismodule(nsync.gates)


@pytest.mark.slow
def test_write_picks_the_format_by_suffix(tmp_path, h200_analysis) -> None:
    analysis = h200_analysis("print_deg")
    data = json.loads(nsync.write(analysis, tmp_path / "r.json").read_text())
    assert data["schema"] == "nsync.analysis/1" and data["callsites"][0]["line"] == 19
    assert "`w_print.py:19`" in nsync.write(nsync.build_report(analysis), tmp_path / "r.md").read_text()
    assert nsync.write(analysis, tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    with sqlite3.connect(nsync.write(analysis, tmp_path / "r.db")) as db:
        assert db.execute("select count(*) from syncs").fetchone()[0] == len(analysis.syncs)
    named = nsync.write(analysis, tmp_path / "r.txt", format="json")
    assert json.loads(named.read_text())["schema"] == "nsync.analysis/1"


def test_write_refuses_what_it_cannot_tell_or_hold(tmp_path, h200_analysis) -> None:
    analysis = h200_analysis("print_deg")
    with pytest.raises(UsageError, match="which format"):
        nsync.write(analysis, tmp_path / "r.txt")
    with pytest.raises(UsageError, match="the database holds every sync"):
        nsync.write(nsync.build_report(analysis), tmp_path / "r.db")


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
    from nsync.report.diff import read_diff_report
    from nsync.report.ranks import RanksReport, read_ranks_report

    for change in (
        nsync.diff(h200_analysis("print_ok"), h200_analysis("print_deg")),
        nsync.diff(real_analysis("timm_gradnorm_healthy"), real_analysis("timm_gradnorm")),
    ):
        first = nsync.write(change, tmp_path / "d.json").read_text()
        assert nsync.render_json(read_diff_report(tmp_path / "d.json")) == first
    assert '"unprofiled_baseline"' in first
    report = nsync.build_report(h200_analysis("p2"))
    ranks = RanksReport("nsync.ranks/1", [], 0, [0.0], 0.0, [], "none", False, ["w"], [report, report])
    written = nsync.write(ranks, tmp_path / "r.json").read_text()
    assert nsync.render_json(read_ranks_report(tmp_path / "r.json")) == written
    with pytest.raises(nsync.TraceError, match="not an nsync diff"):
        read_diff_report(tmp_path / "r.json")
