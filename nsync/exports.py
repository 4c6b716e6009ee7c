"""What marks a file as SQLite, and an SQLite file as an nsys export: the loader opens only such files, and
``--db`` never writes into one."""

SQLITE_MAGIC = b"SQLite format 3\x00"
# Tables every nsys export since 2020 writes, whatever was traced.
NSYS_MARKER_TABLES = (
    "StringIds",
    "ANALYSIS_DETAILS",
    "TARGET_INFO_SESSION_START_TIME",
    "EXPORT_META_DATA",
    "META_DATA_EXPORT",
    "ThreadNames",
)
