#!/usr/bin/env python3
"""hold_lock.py DB SECONDS: holds SQLite's write lock on DB (BEGIN EXCLUSIVE)
for SECONDS, as another process writing to the database would; prints
"locked" once it holds it."""
import sqlite3
import sys
import time

db, seconds = sys.argv[1], float(sys.argv[2])
conn = sqlite3.connect(db, isolation_level=None, timeout=30)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(seconds)
conn.execute("ROLLBACK")
