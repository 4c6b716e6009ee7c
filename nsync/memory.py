"""How the process hands freed memory back, so that peak RSS tracks what the analysis really holds.

glibc keeps freed arrays in its heap once its mmap threshold has grown, so a multi-GiB load would leave
the process that large; with a small threshold every big temporary is a fresh mmap whose pages the
kernel zeroes again (a third of the run in the kernel). The middle way, measured on a 10 M-row trace
(2 cores, `make bench`): arrays up to 64 MiB (a column of 8 M rows) come from the heap and are reused,
the heap is trimmed beyond 16 MiB of free space at its top, and what stages free goes back to the OS
between stages (``malloc_trim``). Elsewhere than glibc both calls do nothing.
"""

from __future__ import annotations

import ctypes
import functools

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
HEAP_ARRAY_LIMIT_BYTES = 64 << 20  # larger allocations are mmapped, and unmapped when freed
TRIM_THRESHOLD_BYTES = 16 << 20


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt, libc.malloc_trim  # noqa: B018 -- both exist only in glibc
    except (OSError, AttributeError):
        return None
    return libc


def tune_allocator() -> None:
    """Fix glibc's mmap and trim thresholds (for a command-line process that analyses big traces)."""
    libc = _glibc()
    if libc is not None:
        libc.mallopt(M_MMAP_THRESHOLD, HEAP_ARRAY_LIMIT_BYTES)
        libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)


def release_freed_memory() -> None:
    """Hand the heap's free pages back to the OS (between pipeline stages; a few ms)."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)
