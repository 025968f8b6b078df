#!/usr/bin/env python3
"""A TCP proxy that adds a fixed delay per round trip, and logs each connection and request.

usage: bench/delay_proxy.py --listen PORT --upstream HOST:PORT [--delay-ms 25] --log FILE

What it delays, exactly (standard library only, asyncio):

- **Each new connection**: the proxy waits DELAY before it connects upstream and before it
  forwards anything of that connection: the round trip of a TCP handshake, which a proxy on
  loopback cannot delay otherwise (the kernel completes the client's handshake at once). TLS
  would add one or two round trips more; none is modelled.
- **Each chunk from the client to the server** is forwarded DELAY after it arrived (chunks keep
  their order; a request written in one piece is delayed once): a request's round trip, with the
  whole delay put on the way up.
- Nothing from the server to the client is delayed.

So a request on a kept connection costs DELAY more than on loopback, and a request on a new
connection 2 × DELAY more.

The log is JSON Lines, one object per event, times in seconds (time.monotonic()):
`{"ev": "conn", "conn": N, "t": T}` when a connection is accepted; `{"ev": "req", "conn": N,
"t": T}` when a request's first byte arrives (the first client chunk after the server last
spoke on that connection, or the connection's first); `{"ev": "resp", "conn": N, "t": T,
"after_ms": MS}` when the first byte of the server's answer to it arrives (MS is measured from
the request's first byte arriving at the proxy, so it includes the added delays).
"""
import argparse, asyncio, json, time


class Log:
    def __init__(self, path):
        self.f = open(path, 'a', buffering=1)

    def write(self, **kv):
        self.f.write(json.dumps(kv) + '\n')


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--listen', type=int, required=True)
    ap.add_argument('--upstream', required=True)
    ap.add_argument('--delay-ms', type=float, default=25.0)
    ap.add_argument('--log', required=True)
    args = ap.parse_args()
    host, port = args.upstream.rsplit(':', 1)
    delay = args.delay_ms / 1000
    log = Log(args.log)
    counter = 0

    async def handle(creader, cwriter):
        nonlocal counter
        counter += 1
        conn = counter
        log.write(ev='conn', conn=conn, t=time.monotonic())
        state = {'req_t': None, 'answered': True}
        await asyncio.sleep(delay)  # the handshake's round trip
        try:
            sreader, swriter = await asyncio.open_connection(host, int(port))
        except OSError:
            cwriter.close()
            return
        queue = asyncio.Queue()

        async def read_client():
            while True:
                data = await creader.read(65536)
                now = time.monotonic()
                if data and state['answered']:
                    state['answered'] = False
                    state['req_t'] = now
                    log.write(ev='req', conn=conn, t=now)
                await queue.put((now + delay, data))
                if not data:
                    return

        async def up():
            while True:
                due, data = await queue.get()
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                if not data:
                    if swriter.can_write_eof():
                        swriter.write_eof()
                    return
                swriter.write(data)
                await swriter.drain()

        async def down():
            while True:
                data = await sreader.read(65536)
                if not data:
                    cwriter.close()
                    return
                now = time.monotonic()
                if not state['answered']:
                    state['answered'] = True
                    log.write(ev='resp', conn=conn, t=now,
                              after_ms=round(1000 * (now - state['req_t']), 2))
                cwriter.write(data)
                await cwriter.drain()

        tasks = [asyncio.ensure_future(c) for c in (read_client(), up(), down())]
        try:
            await tasks[2]
        except (ConnectionError, OSError):
            pass
        finally:
            for t in tasks:
                t.cancel()
            swriter.close()
            cwriter.close()

    server = await asyncio.start_server(handle, '127.0.0.1', args.listen)
    async with server:
        await server.serve_forever()


if __name__ == '__main__':
    asyncio.run(main())
