#!/usr/bin/env python3
"""systemd's side of the notify protocol, for test_service.sh.

    notify_socket.py ADDR OUT [LOG]

Binds a datagram socket at ADDR (a path, or @NAME for an abstract socket, as
NOTIFY_SOCKET names them) and appends one JSON object per line to OUT: first
{"listening": true}, then for each datagram {"state": its text, "log_bytes":
the size of LOG when it arrived}, so that a test can tell what the service
had logged before it said READY=1. Runs until killed."""
import json
import os
import socket
import sys


def main():
    addr, out = sys.argv[1], sys.argv[2]
    log = sys.argv[3] if len(sys.argv) > 3 else None
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind("\0" + addr[1:] if addr.startswith("@") else addr)
    with open(out, "a", encoding="utf-8") as f:
        f.write(json.dumps({"listening": True}) + "\n")
        f.flush()
        while True:
            data = s.recv(65536)
            size = os.path.getsize(log) if log and os.path.exists(log) else 0
            f.write(json.dumps({"state": data.decode("utf-8", "replace"), "log_bytes": size}) + "\n")
            f.flush()


if __name__ == "__main__":
    main()
