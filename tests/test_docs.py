"""The README is a door and docs/ the rooms: the README's sample is what the demo prints, its exit codes the
hierarchy's, the CLI reference the code's own help (cog), and every key of the JSON is documented."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess

import pytest

from nsync import EXIT_CODES, Notice
from tests.test_cli import NSYNC, ROOT, run

README = ROOT / "README.md"
DOCS = ROOT / "docs"


def test_the_readme_is_a_door_and_every_room_it_names_exists() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 150
    rooms = re.findall(r"\]\((docs/[a-z-]+\.md|CHANGELOG\.md)", text)
    assert len(rooms) >= 10 and all((ROOT / room).is_file() for room in rooms)


def test_every_docs_page_links_only_to_pages_that_exist() -> None:
    for page in [*DOCS.glob("*.md"), README]:
        for target in re.findall(r"\]\(([a-z-]+\.md|docs/[a-z-]+\.md)(?:#[a-z0-9-]+)?\)", page.read_text()):
            assert (page.parent / target).is_file(), f"{page.name} links to {target}"


def heading_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, no punctuation but hyphens and underscores, spaces as
    hyphens (`## 6. What-if replay (`stages/replay/`)` is #6-what-if-replay-stagesreplay)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_to_a_heading_finds_it() -> None:
    """issue 64: two links pointed at headings that were renamed."""
    pages = [*DOCS.glob("*.md"), README]
    anchors = {page: {heading_anchor(h) for h in re.findall(r"^#+ (.*)$", page.read_text(), re.M)} for page in pages}
    broken = [
        f"{page.name} -> {target}#{anchor}"
        for page in pages
        for target, anchor in re.findall(r"\]\(([^)#\s]*)#([^)\s]+)\)", page.read_text())
        if (page.parent / target if target else page) in anchors
        and anchor not in anchors[page.parent / target if target else page]
    ]
    assert broken == []


@pytest.mark.slow
def test_the_readme_sample_is_what_nsync_analyze_prints_of_the_demo_trace() -> None:
    """The block after "On the bundled degraded trace", as `make demo`'s `nsync analyze` prints it, piped (120
    columns), from the repository's root."""
    sample = README.read_text().split("On the bundled degraded trace")[1].split("```\n")[1].split("```")[0]
    env = {"PATH": os.environ["PATH"], "NO_COLOR": "1"}
    shown = subprocess.run(
        [*NSYNC, "analyze", "fixtures/h200/print_deg.sqlite.xz"], capture_output=True, text=True, cwd=ROOT, env=env
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == sample


def test_the_readme_documents_every_exit_code() -> None:
    table = dict(re.findall(r"^\| `(\d+)` \| (.+?) \|$", README.read_text(), flags=re.M))
    assert {int(k) for k in table} == set(EXIT_CODES)


@pytest.mark.slow
def test_docs_json_lists_every_key_of_the_analysis_json() -> None:
    data = json.loads(run("analyze", ROOT / "fixtures/h200/p4.sqlite.xz", "--json", "-").stdout)
    block = (DOCS / "json.md").read_text().split('{"schema": "nsync.analysis/2"')[1].split("```")[0]
    keys = set(data) | set(data["trace"]) | set(data["steps"]) | set(data["totals"]) | set(data["callsites"][0])
    keys |= set(data["totals"]["per_gpu"][0]) | {field.name for field in dataclasses.fields(Notice)}
    keys |= set(data["what_if"]) | set(data["verdict"]) | set(data["per_step"]) | set(data["timeline"])
    for part in ("ops", "calls", "syncs", "lead", "exposed", "utilisation", "step_utilisation"):
        keys |= set(data["timeline"][part])
    assert {k for k in keys - {"schema"} if f'"{k}"' not in block} == set()  # the split ate "schema"


def test_every_command_has_its_help_in_the_cli_reference() -> None:
    page = (DOCS / "cli.md").read_text()
    for command in ("analyze", "profile", "diff", "measure", "ranks"):
        assert f"## nsync {command}\n" in page and f"Usage: nsync {command} [OPTIONS]" in page


@pytest.mark.skipif(shutil.which("cog", path=str(ROOT / ".venv/bin")) is None, reason="cog is not installed here")
def test_a_stale_cli_reference_fails_the_lint(tmp_path) -> None:
    """make lint runs `cog --check docs/cli.md`: it passes on the page as committed and fails on a copy whose help
    text no longer matches the code's."""
    cog = str(ROOT / ".venv/bin/cog")
    assert subprocess.run([cog, "--check", str(DOCS / "cli.md")], capture_output=True, cwd=ROOT).returncode == 0
    stale = tmp_path / "cli.md"
    stale.write_text((DOCS / "cli.md").read_text().replace("Rank the Python call sites", "Rank the call sites"))
    checked = subprocess.run([cog, "--check", str(stale)], capture_output=True, text=True, cwd=ROOT)
    assert checked.returncode != 0 and "changed" in (checked.stdout + checked.stderr).lower()


def test_the_changelog_names_this_version() -> None:
    from nsync.version import installed_version

    assert f"## {installed_version()}" in (ROOT / "CHANGELOG.md").read_text()


def test_counts_say_one_in_the_singular() -> None:
    """issue 47: "1 syncs", "0 optimizer step(s)"."""
    from nsync.words import counted

    assert [counted(n, "sync") for n in (0, 1, 2)] == ["0 syncs", "1 sync", "2 syncs"]
    assert counted(1, "copy", "copies") == "1 copy" and counted(3, "copy", "copies") == "3 copies"
