#!/usr/bin/env python3
"""A TCP proxy that delays every chunk by a fixed time in each direction, in
order: a database "across the network" for benchmarks on one machine (the
kernel here has no netem). Usage: delay_proxy.py LISTEN_PORT_FILE TARGET_HOST
TARGET_PORT DELAY_MS; it listens on a free loopback port and writes it to
LISTEN_PORT_FILE."""
import asyncio
import sys

port_file, host, port, delay = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]) / 1000


async def pump(reader, writer):
    q = asyncio.Queue()
    loop = asyncio.get_running_loop()

    async def later():
        while True:
            due, data = await q.get()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if data is None:
                break
            writer.write(data)
            await writer.drain()
        writer.close()

    sender = asyncio.create_task(later())
    try:
        while True:
            data = await reader.read(65536)
            q.put_nowait((loop.time() + delay, data or None))
            if not data:
                break
    except ConnectionError:
        q.put_nowait((loop.time(), None))
    await sender


async def handle(cr, cw):
    try:
        sr, sw = await asyncio.open_connection(host, port)
    except OSError:
        cw.close()
        return
    await asyncio.gather(pump(cr, sw), pump(sr, cw), return_exceptions=True)


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.sockets[0].getsockname()[1]))
    import os
    os.rename(port_file + ".tmp", port_file)
    async with server:
        await server.serve_forever()


asyncio.run(main())
