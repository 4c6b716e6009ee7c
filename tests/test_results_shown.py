"""A result in a REPL, a notebook and a script (issue 64): one line as its repr, its report as a notebook's HTML,
no side effect from str(), and a saved result read back from a path given as a string."""

from __future__ import annotations

from pathlib import Path

import pytest

import nsync
from tests.conftest import FIXTURES

TRACE = FIXTURES / "h200/print_deg.sqlite.xz"
VERDICT = "fixing w_print.py:19 would save 0.44 ms per step (13.3 %; 80 % likely 0.27-0.61 ms)"


@pytest.fixture(scope="module")
def analysis() -> nsync.Analysis:
    return nsync.analyze(TRACE)


def test_an_analysis_s_repr_is_its_verdict_on_one_line(analysis: nsync.Analysis) -> None:
    # the verdict the CLI prints for this trace (tests/test_layout.py), not the 168 KB of every field
    assert repr(analysis) == f"<nsync.Analysis of print_deg.sqlite.xz: {VERDICT}>"
    assert str(analysis) == repr(analysis)


def test_a_saved_result_is_read_back_from_a_string_path(tmp_path: Path, analysis: nsync.Analysis) -> None:
    saved = tmp_path / "r.json"
    nsync.write(analysis, saved)
    for path in (str(saved), saved):
        again = nsync.load_result(path)
        assert isinstance(again, nsync.Analysis) and again.verdict == analysis.verdict
    assert repr(nsync.Analysis.load(str(saved))) == repr(analysis)


@pytest.mark.slow
def test_in_a_notebook_a_result_shows_its_report_and_str_shows_nothing(tmp_path: Path) -> None:
    """A real Jupyter kernel (nbclient): the analysis as the cell's value is the HTML report in a frame, its plain
    text the one line; str() and repr() display nothing; a diff shows its report too."""
    nbformat = pytest.importorskip("nbformat")
    from nbclient import NotebookClient

    ok = FIXTURES / "h200/print_ok.sqlite.xz"
    cells = [
        f"import nsync\na = nsync.analyze({str(TRACE)!r})\nb = nsync.analyze({str(ok)!r})",
        "a",
        "text = str(a); line = repr(a)",
        "nsync.diff(b, a)",
    ]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    NotebookClient(notebook, timeout=240, kernel_name="python3").execute()
    first, shown, quiet, diff = (cell.outputs for cell in notebook.cells)
    assert first == [] and quiet == []
    (value,) = shown
    assert value.output_type == "execute_result"
    assert value.data["text/plain"] == f"<nsync.Analysis of print_deg.sqlite.xz: {VERDICT}>"
    assert (
        value.data["text/html"].startswith('<iframe title="nsync report"')
        and "w_print.py:19" in value.data["text/html"]
    )
    (compared,) = diff
    assert compared.data["text/plain"].startswith("<nsync.Diff print_ok.sqlite.xz -> print_deg.sqlite.xz: ")
    assert compared.data["text/html"].startswith('<iframe title="nsync report"')
