#!/usr/bin/env python3
"""A recording proxy in front of a model server, for ablations: an identical request is answered
from what the server answered before.

An ablation runs the same cases with one rule switched off. Until the rule acts, serve sends the
model server exactly the requests the default run sent (the same prompt, grammar, temperature 0),
and every one of them costs seconds of generation on a CPU. This proxy keeps each answer under a
hash of the request (method, path, body); a second configuration pays only for the requests
that differ. At temperature 0 the server's answer to an identical request is its answer again
(llama-server's prompt cache can move a logit in the last place; the write-up says when a
figure was measured through this proxy).

Only `POST` answers with status 200 are kept. A streamed answer (`text/event-stream`) that is not
in the store is passed on as it arrives, so a client that stops reading early (a guard that cut
a turn) closes the connection to the server and the server stops generating: the seconds of a
run behind the proxy then show what the cut saved. Such an unfinished stream is not kept (the
next identical request is generated again); a stream read to its end is kept, and replayed later
in one piece with its content type (serve reads the events the same way). With `--keep-cut`, a
stream the client left is still read to its end and kept, as every stream was before commit
f535353: the server generates it whole (the seconds include it), and a later run that
sends the same request (an ablation with the cutting rule off) gets the same answer, not a new
generation. Anything else passes through. Standard library only.

    python3 bench/upstream_cache.py --upstream http://127.0.0.1:18611 --listen 127.0.0.1:18650 \\
        --dir /tmp/upstream-cache
    tagloop serve --upstream http://127.0.0.1:18650/v1 ...

Prints a line of hits and misses to stderr every 50 requests, and at exit.
"""

import argparse
import hashlib
import http.client
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

MAX_BODY = 64 << 20


class Counts:
    def __init__(self):
        self.lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.cut = 0
        self.broken = 0

    def add(self, hit):
        with self.lock:
            if hit:
                self.hits += 1
            else:
                self.misses += 1
            if (self.hits + self.misses) % 50 == 0:
                self.report()

    def add_cut(self):
        with self.lock:
            self.cut += 1

    def add_broken(self):
        with self.lock:
            self.broken += 1

    def report(self):
        print(f"upstream_cache: {self.hits} hits, {self.misses} misses "
              f"({self.cut} streams left early by the client, {self.broken} broken off or too "
              f"large)", file=sys.stderr, flush=True)


def keep(path, ctype, data):
    tmp = f"{path}.{threading.get_ident()}.tmp"
    with open(tmp, "wb") as f:
        f.write(ctype.encode() + b"\n" + data)
    os.replace(tmp, path)


def make_handler(upstream, store, counts, timeout, keep_cut=False):
    parts = urlsplit(upstream)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def open(self, method, body):
            conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
            headers = {k: v for k, v in self.headers.items()
                       if k.lower() not in ("host", "content-length", "connection", "accept-encoding")}
            conn.request(method, self.path, body=body, headers=headers)
            return conn, conn.getresponse()

        def forward(self, method, body):
            conn, resp = self.open(method, body)
            try:
                data = resp.read(MAX_BODY + 1)
                ctype = resp.getheader("Content-Type", "application/json")
            finally:
                resp.close()
                conn.close()
            return resp.status, ctype, data[:MAX_BODY]

        def reply(self, status, ctype, data):
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def pass_stream(self, conn, resp, path):
            """Sends a streamed answer on as it arrives (chunked); keeps it only if it ended."""
            data = bytearray()
            client = True  # the client still reads
            try:
                ctype = resp.getheader("Content-Type", "text/event-stream")
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                while True:
                    chunk = resp.read1(65536)
                    if not chunk:
                        break
                    data += chunk
                    if len(data) > MAX_BODY:
                        raise ValueError("stream over the size limit")
                    if not client:
                        continue
                    try:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.flush()
                    except OSError:
                        # The client stopped reading (a cut turn). Without --keep-cut, closing
                        # the upstream connection (below) tells the server to stop generating,
                        # and the unfinished stream is not kept; with it, read on to the end.
                        counts.add_cut()
                        self.close_connection = True
                        client = False
                        if not keep_cut:
                            return
                # A body with a length that ended short is an upstream that broke off.
                if resp.length:
                    raise http.client.IncompleteRead(bytes(data), resp.length)
            except (OSError, http.client.HTTPException, ValueError):
                # The server broke off or the stream grew past the limit: nothing is kept, and
                # the client's stream is left without its last chunk (incomplete, as it is).
                counts.add_broken()
                self.close_connection = True
                return
            finally:
                resp.close()
                conn.close()
            # The server's stream ended: keep it before the client reads the last chunk.
            keep(path, ctype, bytes(data))
            if not client:
                return
            try:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:
                self.close_connection = True

        def do_GET(self):
            self.reply(*self.forward("GET", None))

        def do_POST(self):
            length = int(self.headers.get("Content-Length", "0") or 0)
            if length > MAX_BODY:
                self.reply(413, "text/plain", b"too large")
                return
            body = self.rfile.read(length)
            key = hashlib.sha256(b"POST " + self.path.encode() + b"\n" + body).hexdigest()
            path = os.path.join(store, key)
            if os.path.exists(path):
                with open(path, "rb") as f:
                    ctype, _, data = f.read().partition(b"\n")
                counts.add(True)
                self.reply(200, ctype.decode(), data)
                return
            counts.add(False)
            conn, resp = self.open("POST", body)
            ctype = resp.getheader("Content-Type", "application/json")
            if resp.status == 200 and ctype.startswith("text/event-stream"):
                self.pass_stream(conn, resp, path)
                return
            try:
                data = resp.read(MAX_BODY + 1)[:MAX_BODY]
            finally:
                resp.close()
                conn.close()
            if resp.status == 200:
                keep(path, ctype, data)
            self.reply(resp.status, ctype, data)

    return Handler


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--upstream", required=True, help="the model server, http://HOST:PORT")
    ap.add_argument("--listen", default="127.0.0.1:18650")
    ap.add_argument("--dir", required=True, help="where answers are kept (reused across runs)")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--keep-cut", action="store_true",
                    help="read a stream the client left to its end and keep it (paired ablations)")
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    host, port = args.listen.rsplit(":", 1)
    counts = Counts()
    handler = make_handler(args.upstream, args.dir, counts, args.timeout, args.keep_cut)
    server = ThreadingHTTPServer((host, int(port)), handler)
    print(f"upstream_cache: listening on http://{args.listen}", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        counts.report()


if __name__ == "__main__":
    main()
