"""Stage 5b: the fix of each call site, written from the user's own code.

The call site's line is read and parsed (nsync.code), then read (ast, ``code``). Its pattern is recognised from its
text (``patterns``: the taxonomy of the articles nsync grew from: value reads, prints, control flow on GPU
values, dynamic shapes, host-to-device traps, Python builtins on tensors, explicit synchronizes), or from its
function where the text says nothing (``recognise``), and where the code allows it the rewrite is written in
the user's own names, with the one-time set-up it needs and where that goes (``rewrites``). A sync issued
inside a known library gets that library's own switch (``library``). Reads on several lines that one copy
would do are grouped (``groups``); a read in a loop the replay found gets the loop's fix too (``loops``).
Where no pattern fits, or the file is not readable here, the sync kind's hint stands. Nothing here runs the
code: what a rewrite cannot know from the text (a value's type, whether a list is used later) it says in its
caveat. ``advise`` puts it together; ``model`` holds what it adds.
"""

from nsync.stages.advice.advise import advise, advise_callsites, advise_code
from nsync.stages.advice.code import read_code
from nsync.stages.advice.groups import read_groups
from nsync.stages.advice.library import library_advice
from nsync.stages.advice.loops import advise_loops, in_source
from nsync.stages.advice.model import ADVICE_COLUMNS, Advice, LineEdit, ReadGroup, Reads
from nsync.stages.advice.patterns import PATTERNS, UNKNOWN, classify

__all__ = [
    "ADVICE_COLUMNS",
    "PATTERNS",
    "UNKNOWN",
    "Advice",
    "LineEdit",
    "ReadGroup",
    "Reads",
    "advise",
    "advise_callsites",
    "advise_code",
    "advise_loops",
    "classify",
    "in_source",
    "library_advice",
    "read_code",
    "read_groups",
]
