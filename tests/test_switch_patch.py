"""`--suggest-switch`: the rewrites of `--suggest-patch`, each behind `if nsync.fixed():` with the code as it is
under `else:`. Checked on the real captures and their programs: the switched file, with every
`if nsync.fixed():` resolved to its first branch, is the plainly patched file statement for statement; resolved
to its `else:`, the original (less the one-time set-ups, which stay outside the switch)."""

from __future__ import annotations

import ast
import dataclasses
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from nsync.code import first_statement_line, statement_span, string_rows
from nsync.render.patch import SWITCH, _apply

ROOT = Path(__file__).resolve().parent.parent
LAB = ROOT / "fixtures/h200"

# (capture, program): the lab's scenarios, three reads read together, two real programs, two fresh ones
CASES = [(LAB / f"cal/{name}_degraded.sqlite.xz", LAB / f"{name}.py") for name in ("w_print", "w_item", "w_mask",
         "w_tuple", "w_list", "w_two", "w_param")]  # fmt: skip
CASES += [(LAB / "reads/w_reads_degraded.sqlite.xz", LAB / "w_reads.py")]
CASES += [(ROOT / f"fixtures/real/{name}.sqlite.xz", ROOT / f"fixtures/real/{name}.py") for name in
          ("compiled_train", "timm_gradnorm")]  # fmt: skip
CASES += [(ROOT / f"fixtures/fresh/{name}.sqlite.xz", ROOT / f"fixtures/fresh/{name}.py") for name in
          ("pyg_collate", "hf_gpt2_perseq")]  # fmt: skip


class _Resolve(ast.NodeTransformer):
    """Every `if nsync.fixed(): A else: B` as A (``fixed``) or B; `import nsync` dropped."""

    def __init__(self, fixed: bool) -> None:
        self.fixed = fixed
        self.switches = 0

    def visit_If(self, node: ast.If) -> object:
        test = node.test
        if (
            isinstance(test, ast.Call)
            and isinstance(test.func, ast.Attribute)
            and isinstance(test.func.value, ast.Name)
            and (test.func.value.id, test.func.attr) == ("nsync", "fixed")
        ):
            self.switches += 1
            chosen = node.body if self.fixed else node.orelse
            return [self.visit(statement) for statement in chosen]
        return self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> object:
        return None if [alias.name for alias in node.names] == ["nsync"] else node


def _statements(tree: ast.AST) -> list[str]:
    return [ast.dump(node) for node in ast.walk(tree) if isinstance(node, ast.stmt)]


def _nsync(*args: object, cwd: Path) -> None:
    subprocess.run([sys.executable, "-m", "nsync", *map(str, args)], cwd=cwd, check=True, capture_output=True)


@pytest.mark.slow
@pytest.mark.parametrize(("capture", "program"), CASES, ids=[program.stem for _, program in CASES])
def test_each_switched_rewrite_is_the_plain_one_behind_nsync_fixed_and_the_code_as_it_is_behind_else(
    capture: Path, program: Path, tmp_path: Path
) -> None:
    plain, switched = tmp_path / "plain", tmp_path / "switched"
    for folder, flag in ((plain, "--suggest-patch"), (switched, "--suggest-switch")):
        folder.mkdir()
        shutil.copy(program, folder)
        _nsync("analyze", capture, flag, folder / "fix.patch", "-q", cwd=folder)
        subprocess.run(["git", "apply", "--check", "fix.patch"], cwd=folder, check=True)
        subprocess.run(["patch", "-p1", "-s", "-i", "fix.patch"], cwd=folder, check=True)
    text = (switched / program.name).read_text()
    assert text.count("import nsync\n") == 1 and text.count(SWITCH) >= 1
    as_fixed, as_is = _Resolve(True), _Resolve(False)
    fixed_tree = as_fixed.visit(ast.parse(text))
    original_tree = as_is.visit(ast.parse(text))
    assert as_fixed.switches == as_is.switches == text.count(SWITCH)
    assert ast.dump(fixed_tree) == ast.dump(ast.parse((plain / program.name).read_text()))
    # as it is: the original, but for the set-ups the plain patch adds (they stay outside the switch)
    original = _statements(ast.parse(program.read_text()))
    setups = [s for s in _statements(ast.parse((plain / program.name).read_text())) if s not in original]
    kept = _statements(original_tree)
    assert [s for s in kept if s not in setups or s in original] == original
    assert "Each rewrite is behind `if nsync.fixed():`" in (switched / "fix.patch").read_text()


PROGRAM = '''\
"""A program."""
from __future__ import annotations
import torch


def step(x, log):
    for i in range(3):
        value = x.item()
        log.append(value)
    text = """two
lines"""
    return text
'''


def test_the_statements_that_hold_a_rewrite_are_found_in_their_own_block():
    assert statement_span(PROGRAM, 8, 8) == (8, 8, 8)  # inside the for: that statement alone
    assert statement_span(PROGRAM, 8, 9) == (8, 9, 8)
    assert statement_span(PROGRAM, 7, 8) == (7, 9, 4)  # the for's own line: the whole for
    assert statement_span(PROGRAM, 9, 10) == (7, 11, 4)  # two blocks: the statements of the outer one
    assert statement_span(PROGRAM, 40, 40) is None and statement_span("def (", 1, 1) is None
    assert string_rows(PROGRAM) == {11}
    one_line = "for x in xs: total += x.item()\nif a:\n    b = 1\nelif c:\n    d = e.item()\n"
    assert statement_span(one_line, 1, 1) == (1, 1, 0)  # a body on its header's line: the whole statement
    assert statement_span(one_line, 5, 5) == (5, 5, 4)  # inside an elif's body
    assert statement_span(one_line, 4, 5) is None  # the elif clause itself
    assert first_statement_line(PROGRAM) == 3 and first_statement_line("") == 1


def test_a_switch_keeps_its_block_s_indentation_and_refuses_lines_inside_a_string():
    lines = PROGRAM.splitlines()
    rewrite = ("#1 read", "why", [(8, 9, ["        log.append(x.detach())"])])
    changed, said = _apply(lines, [rewrite], switched=True)
    assert changed[2:4] == ["import nsync", "import torch"]
    assert changed[8:15] == [
        "        " + SWITCH,
        "            log.append(x.detach())",
        "        else:",
        "            value = x.item()",
        "            log.append(value)",
        '    text = """two',
        'lines"""',
    ]
    ast.parse("\n".join(changed))
    assert said == ["#1 read: why"]
    deleted = ("#2 gone", "why", [(8, 8, [])])
    changed, _ = _apply(lines, [deleted], switched=True)
    assert changed[8:12] == ["        " + SWITCH, "            pass", "        else:", "            value = x.item()"]
    inside = ("#3 text", "why", [(10, 11, ['    text = "two lines"'])])
    changed, said = _apply(lines, [inside], switched=True)
    assert changed == lines and said == [
        "#3 text: not applied, a string spans lines of its statements (indenting would change it)"
    ]


def test_a_set_up_stays_outside_the_switch_and_a_file_that_imports_nsync_is_not_given_it_twice():
    lines = textwrap.dedent(
        """\
        import nsync
        for x in xs:
            total += x.item()
        """
    ).splitlines()
    fix = ("#1", "why", [(3, 3, ["    total += x.detach()"]), (2, 1, ["total = 0"])])
    changed, _ = _apply(lines, [fix], switched=True)
    assert changed == [
        "import nsync",
        "total = 0",
        "for x in xs:",
        "    " + SWITCH,
        "        total += x.detach()",
        "    else:",
        "        total += x.item()",
    ]


def test_a_file_indented_with_tabs_is_switched_with_tabs():
    lines = ["def step(x, log):", "\tfor i in range(3):", "\t\tlog.append(x.item())"]
    fix = ("#1", "why", [(3, 3, ["\t\tlog.append(x.detach())"])])
    changed, _ = _apply(lines, [fix], switched=True)
    assert changed[3:] == ["\t\t" + SWITCH, "\t\t\tlog.append(x.detach())", "\t\telse:", "\t\t\tlog.append(x.item())"]
    compile("\n".join(changed), "tabs.py", "exec")  # (a mix of tabs and spaces would raise TabError)


@pytest.mark.slow
def test_after_a_measure_it_verdict_nsync_profile_says_the_commands_that_settle_it():
    """After "measure it": with a rewrite nsync writes (fresh's hf_gpt2_perseq, its verdict set to "measure it":
    no bundled capture whose verdict is says it of a site with a rewrite), the switched patch, applied, then
    nsync measure of the program's own command line, quoted as a shell would need it; without one (the hidden
    `.item()`, one of the two bundled captures that say "measure it"), the switch is the user's to write."""
    import shlex

    import nsync

    fresh = ROOT / "fixtures/fresh"

    def profiled(trace: str, sqlite: str = "out/run.sqlite", sources: list[Path] | None = None) -> nsync.ProfileResult:
        """As nsync profile analyses it: with the calibration beside it."""
        analysis = nsync.analyze(ROOT / "fixtures" / trace, source_dirs=sources or [])
        return nsync.ProfileResult(analysis, Path(sqlite), None, 0, False)

    def settle(result: nsync.ProfileResult, words: list[str], switch: Path | None = None, **options: object) -> str:
        return nsync.to_settle(result, words, nsync.ProfileOptions(**options), switch)  # type: ignore[arg-type]

    written = profiled("fresh/hf_gpt2_perseq.sqlite.xz", sources=[fresh])
    assert written.analysis.verdict is not None
    measure = dataclasses.replace(written.analysis.verdict, worth_fixing=False, measure=True)
    written = dataclasses.replace(written, analysis=dataclasses.replace(written.analysis, verdict=measure))
    words = ["train.py", "--name", "it's mine"]
    said = settle(written, words)
    assert said == (
        "to settle it: nsync analyze out/run.sqlite --suggest-switch both.patch && git apply both.patch && "
        "nsync measure " + shlex.quote("train.py --name 'it'\"'\"'s mine'")
    )
    assert shlex.split(shlex.split(said.rpartition("nsync measure ")[2])[0]) == words  # the shell gives them back
    again = settle(written, [], Path("fix.patch"), module="pkg.train", python="/opt/py")
    assert again == "to settle it: git apply fix.patch && nsync measure --python /opt/py '-m pkg.train'"
    unwritten = profiled("h200/hidden/1/w_hidden_degraded.sqlite.xz", "r.sqlite")
    assert unwritten.analysis.verdict is not None and unwritten.analysis.verdict.measure
    assert settle(unwritten, ["t.py"]) == (
        "to settle it, put the fix behind `if nsync.fixed():` in the program, then: nsync measure t.py; it has no "
        "optimizer step: end each of its steps with nsync.step()"
    )
    # the same capture, had its steps been found by an NVTX range of its own (no optimizer step): nsync.step()
    serving_steps = dataclasses.replace(unwritten.analysis.steps, source="nvtx:batch")
    serving = dataclasses.replace(unwritten, analysis=dataclasses.replace(unwritten.analysis, steps=serving_steps))
    assert settle(serving, ["t.py"]) == (
        "to settle it, put the fix behind `if nsync.fixed():` in the program, then: nsync measure t.py; it has no "
        "optimizer step: end each of its steps with nsync.step()"
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", ["pyg_collate", "hf_gpt2_perseq"])
def test_the_switched_patch_measured_end_to_end_on_the_h200_is_the_one_nsync_writes_and_it_read_faster(
    name: str, tmp_path: Path
):
    """fixtures/h200/switched, "The loop end to end": nsync's switched patch of the first session's capture,
    applied as written and measured with `nsync measure` (five runs): faster, as the fix written by hand was."""
    switched = ROOT / "fixtures/h200/switched"
    shutil.copy(ROOT / f"fixtures/fresh/{name}.py", tmp_path)
    _nsync("analyze", ROOT / f"fixtures/fresh/{name}.sqlite.xz", "--suggest-switch", "both.patch", "-q", cwd=tmp_path)
    assert (tmp_path / "both.patch").read_text() == (switched / f"e2e-{name}.patch").read_text()
    measured = json.loads((switched / f"e2e-{name}.json").read_text())
    assert measured["verdict"] == "faster" and measured["change"]["high_pct"] < 0
    assert (
        measured["baseline"]["command"][1:]
        == measured["candidate"]["command"][1:]
        == [f"{name}.py", "degraded", "1000"]
    )
    change = measured["change"]
    row = f"{change['pct']:.1f} % ({change['low_pct']:.1f} to {change['high_pct']:.1f}), faster"
    assert row in (switched / "README.md").read_text()
