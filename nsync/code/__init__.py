"""The one reader of the user's source: where a file the trace names is read here (files.py), each version of its
text parsed once (parse.py), and what its statements are. It answers with line numbers, never frames or advice,
and imports nothing of nsync."""

from nsync.code.files import find_source, search_folders, source_lines, source_text
from nsync.code.parse import first_statement_line, parsed, snippet, statement_span, string_rows

__all__ = [
    "find_source",
    "first_statement_line",
    "parsed",
    "search_folders",
    "snippet",
    "source_lines",
    "source_text",
    "statement_span",
    "string_rows",
]
