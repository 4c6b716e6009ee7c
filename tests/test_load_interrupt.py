"""A Ctrl-C while ADBC reads a table is not lost. ADBC replaces Python's SIGINT handler during its blocking
calls and asks the statement to cancel, which SQLite's cannot: the query failed, sqlite3 read it again, and the
analysis ran on to its end (seen once in the suite: `nsync analyze` exited 0 after a Ctrl-C)."""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
from pathlib import Path

import pytest

from nsync.load.nsys.db import _with_adbc

SLOW = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000000) SELECT count(*) FROM c"


def test_a_ctrl_c_during_a_query_raises_keyboard_interrupt(tmp_path: Path) -> None:
    path = tmp_path / "any.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE t (x)")
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # a background suite ignores SIGINT
    ctrl_c = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))  # the query takes about 1 s here
    try:
        ctrl_c.start()
        with pytest.raises(KeyboardInterrupt):
            _with_adbc(path, SLOW, (), lambda reader: reader.read_all())
    finally:
        ctrl_c.cancel()
        signal.signal(signal.SIGINT, previous)
