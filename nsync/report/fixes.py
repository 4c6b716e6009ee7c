"""What a fix is, as every result and renderer sees it: one call site's Advice, and reads one copy would do."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Advice:
    """How to fix one call site: its pattern, and the rewrite in the user's own names where one can be written.

    ``rewrite`` replaces lines ``first_line``-``last_line`` of ``file`` (indented as there; '' deletes them;
    None: no rewrite could be written, ``why`` and ``caveat`` say what to do). ``setup`` goes before line
    ``setup_line`` (0: nowhere in particular, e.g. a library's setting). ``basis``: "code" (read from the
    line), "library" (a known library's sync and its switch) or "kind" (the sync's kind alone: no readable
    line, or no pattern fits).
    """

    pattern: str
    dependency: str  # "false": the host does not need the value (delete, defer, batch); "true": restructure
    short: str  # the fix in a few words, for a table's cell
    why: str
    rewrite: str | None
    setup: str
    caveat: str
    basis: str
    file: str = ""
    first_line: int = 0
    last_line: int = 0
    setup_line: int = 0

    @property
    def span(self) -> str:
        """The lines the rewrite replaces, in words: "line 17", "lines 3-6"."""
        if self.last_line == self.first_line:
            return f"line {self.first_line}"
        return f"lines {self.first_line}-{self.last_line}"

    @property
    def change(self) -> str:
        """The rewrite in words, before its code: "delete line 19", "line 17 becomes", "lines 3-6 become"
        ('' where none was written)."""
        if self.rewrite is None:
            return ""
        if not self.rewrite:
            return f"delete {self.span}"
        return f"{self.span} {'becomes' if self.last_line == self.first_line else 'become'}"


@dataclass(frozen=True)
class LineEdit:
    """Lines ``first_line``-``last_line`` of a file replaced by ``text`` ('' deletes them)."""

    first_line: int
    last_line: int
    text: str


@dataclass(frozen=True)
class Reads:
    """Reads on several lines of one function, each a step, whose values the host uses: one copy of them all,
    at the last of them, does what the reads do with one sync instead of one each (the coalescing of the
    articles nsync grew from). What the result says of them (ReadTogether adds the saving)."""

    file: str
    function: str
    lines: list[int]
    why: str
    edits: list[LineEdit]
    caveat: str
