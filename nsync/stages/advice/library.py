"""Known libraries (nsync.knowledge): a sync they issue is fixed by their own setting, where one exists."""

from __future__ import annotations

from nsync.knowledge import library_sync
from nsync.stages.advice.model import Advice


def library_advice(package: str, file: str, function: str) -> Advice | None:
    """The switch of a known library for a sync it issues in ``file``'s ``function``, or None."""
    known = library_sync(package, file, function)
    if known is None:
        return None
    name, switch = known.package, known.switch
    return Advice(
        pattern=known.pattern,
        dependency="false" if switch else "true",
        short=f"a setting of {name}" if switch else f"inside {name}: no setting",
        why=f"{known.why} (inside {package}, not in your code).",
        rewrite=None,
        setup=switch,
        caveat=known.caveat,
        basis="library",
        file=file,
    )
