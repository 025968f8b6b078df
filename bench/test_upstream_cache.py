#!/usr/bin/env python3
"""Tests for bench/upstream_cache.py against a small streaming server on a loopback port:
a stream read to its end is kept and replayed, a stream the client leaves early reaches the
server as a closed connection and is not kept (with `--keep-cut`: is read to its end and kept),
a plain JSON answer is kept.

    python3 bench/test_upstream_cache.py
"""

import http.client
import os
import sys
import tempfile
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import upstream_cache  # noqa: E402

EVENTS = 40


class Upstream:
    """A model server stand-in: /stream sends EVENTS server-sent events, one every 20 ms."""

    def __init__(self):
        self.requests = 0
        self.broken = threading.Event()
        self.finished = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def start_stream(self):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()

            def event(self, i):
                event = b"data: {\"n\": %d}\n\n" % i
                self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                self.wfile.flush()

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                outer.requests += 1
                if self.path == "/broken":
                    # Three events, then the connection closes without the last chunk.
                    self.start_stream()
                    for i in range(3):
                        self.event(i)
                    self.close_connection = True
                    return
                if self.path != "/stream":
                    body = b'{"ok": true}'
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                self.start_stream()
                try:
                    for i in range(EVENTS):
                        self.event(i)
                        time.sleep(0.02)
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                    outer.finished.set()
                except OSError:
                    outer.broken.set()
                    self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


class Proxy:
    """The proxy in front of a fresh stand-in and store; `keep_cut` is the mode under test. The
    tests here hold in both modes."""
    keep_cut = False

    def setUp(self):
        self.upstream = Upstream()
        self.tmp = tempfile.TemporaryDirectory()
        self.store = self.tmp.name
        self.counts = upstream_cache.Counts()
        handler = upstream_cache.make_handler(self.upstream.url, self.store, self.counts, 10,
                                              self.keep_cut)
        self.proxy = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self.proxy.serve_forever, daemon=True).start()

    def tearDown(self):
        for server in (self.proxy, self.upstream.server):
            server.shutdown()
            server.server_close()
        self.tmp.cleanup()

    def kept(self):
        """The answers the store holds (a `.tmp` file is one being written)."""
        return [n for n in os.listdir(self.store) if not n.endswith(".tmp")]

    def post(self, path, body=b'{"prompt": "hi"}'):
        conn = http.client.HTTPConnection("127.0.0.1", self.proxy.server_address[1], timeout=10)
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        return conn, conn.getresponse()

    def test_a_stream_read_to_its_end_is_kept_and_replayed(self):
        conn, resp = self.post("/stream")
        first = resp.read()
        conn.close()
        self.assertEqual(first.count(b"data: "), EVENTS)
        self.assertEqual(len(self.kept()), 1)
        conn, resp = self.post("/stream")
        second = resp.read()
        conn.close()
        self.assertEqual(second, first)
        self.assertEqual(self.upstream.requests, 1)
        self.assertEqual((self.counts.hits, self.counts.misses, self.counts.cut), (1, 1, 0))
        # the same connection serves a JSON answer after a streamed one
        conn, resp = self.post("/stream")
        resp.read()
        conn.request("POST", "/json", body=b"{}", headers={"Content-Type": "application/json"})
        self.assertEqual(conn.getresponse().read(), b'{"ok": true}')
        conn.close()

    def test_a_stream_the_server_broke_off_is_not_kept_and_arrives_incomplete(self):
        conn, resp = self.post("/broken")
        with self.assertRaises(http.client.IncompleteRead):
            resp.read()
        conn.close()
        deadline = time.time() + 5
        while self.counts.broken == 0 and time.time() < deadline:
            time.sleep(0.02)
        self.assertEqual((self.counts.broken, self.counts.cut), (1, 0))
        self.assertEqual(self.kept(), [])

    def test_a_json_answer_is_kept(self):
        for _ in range(2):
            conn, resp = self.post("/json")
            self.assertEqual(resp.read(), b'{"ok": true}')
            self.assertEqual(resp.getheader("Content-Type"), "application/json")
            conn.close()
        self.assertEqual(self.upstream.requests, 1)
        self.assertEqual((self.counts.hits, self.counts.misses), (1, 1))


class PassThroughTest(Proxy, unittest.TestCase):
    """The default: a stream the client leaves is not read on, so the server stops."""

    def test_a_stream_left_early_stops_the_server_and_is_not_kept(self):
        conn, resp = self.post("/stream")
        first = resp.read1(64)
        self.assertIn(b"data: ", first)
        # A client that cut the turn: it closes the connection with most events unsent.
        conn.sock.close()
        conn.close()
        self.assertTrue(self.upstream.broken.wait(5), "the server never saw the connection close")
        self.assertFalse(self.upstream.finished.is_set())
        deadline = time.time() + 5
        while self.counts.cut == 0 and time.time() < deadline:
            time.sleep(0.02)
        self.assertEqual(self.counts.cut, 1)
        self.assertEqual(self.kept(), [])
        conn, resp = self.post("/stream")
        self.assertEqual(resp.read().count(b"data: "), EVENTS)
        conn.close()
        self.assertEqual(self.upstream.requests, 2)


class KeepCutTest(Proxy, unittest.TestCase):
    """--keep-cut: a stream the client left is read to its end and kept, for paired ablations."""
    keep_cut = True

    def test_a_stream_left_early_is_read_to_its_end_and_kept(self):
        conn, resp = self.post("/stream")
        self.assertIn(b"data: ", resp.read1(64))
        conn.sock.close()
        conn.close()
        self.assertTrue(self.upstream.finished.wait(5), "the stream was not read to its end")
        deadline = time.time() + 5
        while not self.kept() and time.time() < deadline:
            time.sleep(0.02)
        self.assertEqual(self.counts.cut, 1)
        conn, resp = self.post("/stream")
        self.assertEqual(resp.read().count(b"data: "), EVENTS)
        conn.close()
        self.assertEqual(self.upstream.requests, 1)


if __name__ == "__main__":
    unittest.main()
