"""How text is laid out in a terminal and a CI log: tables whose columns fit the width (the least important left
out, and named), lines of code broken where they cannot fit, items packed between separators."""

from __future__ import annotations

import textwrap

from rich.console import JustifyMethod
from rich.table import Table
from rich.text import Text

Column = tuple[str, str, JustifyMethod]  # a table column: its header, its key in the rows, its justification
ISSUED_AT: Column = ("issued at", "issued", "left")  # the library line that issues a site's sync
SOURCE_LINE: Column = ("line", "code", "left")
CONTINUED = "↪ "  # begins the rest of a line of code too long for the width, four columns further in


def packed(label: str, items: list[str], width: int) -> str:
    """``label`` and ``items`` joined by " · ", a line broken between two items, never inside one (unless it is
    longer than the width by itself)."""
    lines = [label + items[0]]
    for item in items[1:]:
        if len(lines[-1]) + 3 + len(item) > width:
            lines[-1] += " ·"
            lines.append(item)
        else:
            lines[-1] += " · " + item
    return "\n".join(lines)


def code_lines(text: str, indent: str, width: int) -> list[str]:
    """Lines of code at ``indent``, as written; one longer than the width breaks at its last space that fits
    (anywhere, if none) and goes on below, four columns further in behind :data:`CONTINUED`: no part of it
    passes for a line of its own, and nothing is left out."""
    out = []
    for line in textwrap.dedent(text).splitlines():
        head, rest = indent, line
        while len(head) + len(rest) > width and len(head) < width:  # (each turn takes a character at least)
            room = width - len(head)
            cut = rest.rfind(" ", 1, room + 1)
            cut = cut if cut > room // 2 else room  # no space far enough in: break inside the word
            out.append(head + rest[:cut].rstrip())
            head, rest = indent + "    " + CONTINUED, rest[cut:].lstrip()
        out.append(head + rest)
    return out


def table_width(columns: list[Column], rows: list[dict[str, str]]) -> int:
    """A rich table's width with edges: each column's widest line of a cell, its padding (2) and rule (1), and the
    last rule."""
    widths = [
        max(len(line) for text in [header, *(r[key] for r in rows)] for line in text.split("\n"))
        for header, key, _ in columns
    ]
    return sum(widths) + 3 * len(widths) + 1


def fitted_table(columns: list[Column], rows: list[dict[str, str]], width: int) -> Table:
    """As many of ``columns`` (header, key, justify; most important first) as fit in ``width``, with a caption
    naming those left out. No cell and no header word is ever broken, so that ``grep w_print.py:19`` finds
    its line in any log."""
    left_out: list[str] = []
    while len(columns) > 2 and table_width(columns, rows) > width:
        left_out.insert(0, columns[-1][0].replace("\n", " "))
        columns = columns[:-1]
    table = Table(show_lines=False, header_style="bold", expand=False)
    if left_out:
        table.caption = f"not shown at {width} columns: {', '.join(left_out)} (--json has every figure)"
    for header, _key, justify in columns:
        table.add_column(header, justify=justify, no_wrap=True)
    for row in rows:
        table.add_row(*(Text(row[key]) for _header, key, _ in columns))
    return table
