"""nsys's own lines on its stdout are kept out of the program's output, which passes unchanged and live."""

from __future__ import annotations

import io
import itertools
import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from nsync.capturing.nsys.output import NsysOutput, relay

# What Debian's nsys 2022.4 printed after `print('x')` (captured here, the path shortened).
CHATTER_2022 = (
    b"Generating '/tmp/nsys-report-27ca.qdstrm'\n"
    b"\r[1/1] [0%                          ] f2.nsys-rep\r[1/1] [11%                         ] f2.nsys-rep"
    b"\r[1/1] [===22%                      ] f2.nsys-rep\r[1/1] [========================100%] f2.nsys-rep\n"
    b"Generated:\n    /tmp/exp/f2.nsys-rep\n"
)
# nsys 2025.x: the same block, with its collection notes around it
CHATTER_2025 = b"Collecting data...\nCapture range ended in the application.\n" + CHATTER_2022.replace(b"f2.", b"run.")


def split(stream: bytes, cuts: list[int]) -> tuple[bytes, list[str]]:
    """Feed ``stream`` in pieces cut at ``cuts``; the program's bytes and nsys's reported lines."""
    output = NsysOutput()
    program, own = b"", []
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(stream)}), len(stream)]
    for a, b in itertools.pairwise(bounds):
        passed, said = output.feed(stream[a:b])
        program, own = program + passed, own + said
    passed, said = output.finish()
    return program + passed, own + said


def test_the_real_2022_chatter_is_not_the_programs_output() -> None:
    assert split(b"x\n" + CHATTER_2022, []) == (b"x\n", [])


def test_nsys_notes_are_reported_and_its_progress_and_paths_are_not() -> None:
    program, own = split(b"loss 0.5\n" + CHATTER_2025, [3, 40, 97])
    assert program == b"loss 0.5\n"
    assert own == ["Collecting data...", "Capture range ended in the application."]


def test_a_program_line_left_open_is_ended_before_nsys_speaks() -> None:
    assert split(b"tail without newline" + CHATTER_2022, [20])[0] == b"tail without newline\n"
    assert split(b"tail without newline" + CHATTER_2022, [])[0] == b"tail without newline\n"  # one read
    assert split(b"[ep" + CHATTER_2022, [3])[0] == b"[ep\n"  # held as a possible '[1/1]', then the program's


def test_a_partial_line_is_passed_on_at_once_unless_nsys_could_be_writing_it() -> None:
    output = NsysOutput()
    assert output.feed(b"epoch 1: ") == (b"epoch 1: ", [])  # a prompt or progress of the program's: now
    assert output.feed(b"done\n[1/") == (b"done\n", [])  # '[1/' may be nsys's progress bar: held
    assert output.feed(b"3] training\n") == (b"[1/3] training\n", [])  # it was not


def _has_nsys_text(data: bytes) -> bool:
    """Whether a program's output holds something that reads as nsys's own (such output is nsys's by design)."""
    probe = NsysOutput()
    return any(probe._nsys_from(line) is not None for line in data.split(b"\n"))


PROGRAM_BYTES = st.binary(max_size=300) | st.lists(
    st.sampled_from([b"\n", b"\r", b"[", b"]", b"=", b"%", b" ", b"1/1", b"Gen", b"erated:", b"x", b"\xff", b"    "]),
    max_size=60,
).map(b"".join)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(program=PROGRAM_BYTES, cuts=st.lists(st.integers(0, 1200), max_size=12), newer=st.booleans())
def test_any_program_output_passes_unchanged_however_it_is_read(program: bytes, cuts: list[int], newer: bool) -> None:
    assume(not _has_nsys_text(program))
    chatter = CHATTER_2025 if newer else CHATTER_2022
    passed, _ = split(program + chatter, cuts)
    closed = b"" if not program or program.endswith(b"\n") else b"\n"
    assert passed == program + closed
    assert not re.search(rb"Generat|nsys-rep|\[1/1\]", passed[len(program) :])
    alone, _ = split(program, cuts)  # the program's output alone (nsys said nothing): exactly as written
    assert alone == program


def test_relay_passes_on_the_programs_bytes_and_says_nsys_lines() -> None:
    sink, said = io.BytesIO(), []
    relay(io.BufferedReader(io.BytesIO(b"hello\n" + CHATTER_2025)), sink, said.append).join(10)
    assert sink.getvalue() == b"hello\n"
    assert said == ["nsys: Collecting data...", "nsys: Capture range ended in the application."]
