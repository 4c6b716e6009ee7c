"""What nsync knows that is not in a trace: each library's syncs and the setting that removes them
(libraries.json, read by libraries.py). The stages read this knowledge through this package alone, so that a
library's new version is taught in one place."""

from nsync.knowledge.libraries import LibrarySync, generate_reads, library_sync

__all__ = ["LibrarySync", "generate_reads", "library_sync"]
