#!/usr/bin/env python3
"""hold_lock.py DB SECONDS [UNTIL]: holds SQLite's write lock on DB (BEGIN
EXCLUSIVE) for SECONDS, as another process writing to the database would;
prints "locked" once it holds it. With UNTIL (a file), it holds the lock
until that file exists (polled every 10 ms), then SECONDS more."""
import os
import sqlite3
import sys
import time

db, seconds = sys.argv[1], float(sys.argv[2])
conn = sqlite3.connect(db, isolation_level=None, timeout=30)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
if len(sys.argv) > 3:
    while not os.path.exists(sys.argv[3]):
        time.sleep(0.01)
time.sleep(seconds)
conn.execute("ROLLBACK")
