#!/usr/bin/env python3
"""Open N concurrent streaming requests against server.py and check they all finish.

  loadtest.py --port P [--n 1000] [--timeout 120] [--min-peak N]

Requests rotate over the three endpoints, all with "stream": true. Each must
return 200, a chunked SSE body and the endpoint's terminal event. Afterwards
GET /_health must report peak_active >= --min-peak (default N), proving the
requests were in flight at the same time. Prints one summary line; exit 1 on
any failure. Standard library only.
"""

import argparse
import asyncio
import json
import resource
import sys
import time

TARGETS = [
    ("/v1/chat/completions", b"data: [DONE]\n\n"),
    ("/v1/responses", b"event: response.completed\n"),
    ("/v1/messages", b"event: message_stop\n"),
]


async def read_chunked(reader):
    out = []
    while True:
        line = await reader.readline()
        if not line:
            raise ConnectionError("connection closed inside chunked body")
        size = int(line.split(b";")[0].strip(), 16)
        if size == 0:
            await reader.readline()
            return b"".join(out)
        out.append(await reader.readexactly(size))
        await reader.readexactly(2)


async def one(port, i):
    path, terminal = TARGETS[i % len(TARGETS)]
    body = json.dumps({"model": "load", "stream": True, "stream_options": {"include_usage": True},
                       "messages": [{"role": "user", "content": f"request {i}"}]}).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (path.encode(), len(body), body))
        await writer.drain()
        status = await reader.readline()
        if not status.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"status {status!r}")
        chunked = False
        while True:
            h = await reader.readline()
            if h in (b"\r\n", b""):
                break
            if h.lower().startswith(b"transfer-encoding:") and b"chunked" in h.lower():
                chunked = True
        if not chunked:
            raise RuntimeError("not chunked")
        data = await read_chunked(reader)
        if terminal not in data:
            raise RuntimeError(f"{path}: no terminal event")
    finally:
        writer.close()


async def health(port):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /_health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    await writer.drain()
    data = await reader.read()
    writer.close()
    return json.loads(data.split(b"\r\n\r\n", 1)[1])


async def main_async(a):
    t0 = time.monotonic()
    results = await asyncio.wait_for(
        asyncio.gather(*(one(a.port, i) for i in range(a.n)), return_exceptions=True), a.timeout)
    dt = time.monotonic() - t0
    errors = [r for r in results if isinstance(r, BaseException)]
    h = await health(a.port)
    min_peak = a.n if a.min_peak is None else a.min_peak
    print(f"loadtest: {a.n - len(errors)}/{a.n} streams ok in {dt:.2f}s, "
          f"server peak_active={h['peak_active']} (need >= {min_peak})")
    for e in errors[:5]:
        print(f"loadtest: error: {type(e).__name__}: {e}", file=sys.stderr)
    return 0 if not errors and h["peak_active"] >= min_peak else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--min-peak", type=int)
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    sys.exit(asyncio.run(main_async(a)))


if __name__ == "__main__":
    main()
