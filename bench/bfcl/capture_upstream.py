#!/usr/bin/env python3
"""A stand-in model server that keeps every request serve sends it, for calibrations that need
serve's own prompts (the rendered tools, the grammar) without generating anything.

Every `POST …/chat/completions` (whole, not streamed: run serve with `--no-stream`) is appended to
`--out` as one JSON line, `{"n": N, "body": …}`, and answered with a plain final answer, so
serve ends each client request after its first turn. `GET …/models` lists one model.

    ~/.cache/tagloop-bfcl/bin/python bench/bfcl/capture_upstream.py --port 18670 --out prompts.jsonl &
    tagloop serve --upstream http://127.0.0.1:18670/v1 --listen 127.0.0.1:18671 --no-stream ... &
    scripts/bfcl.sh --base-url http://127.0.0.1:18671/v1 --model m --split dev --category ...

Standard library only.
"""

import argparse
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ANSWER = "<final_answer>ok</final_answer>"


def make_handler(out, lock, counter):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def reply(self, value):
            data = json.dumps(value).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self.reply({"object": "list", "data": [{"id": "m", "object": "model"}]})

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))
            with lock:
                counter[0] += 1
                out.write(json.dumps({"n": counter[0], "path": self.path,
                                      "body": json.loads(body or b"null")}) + "\n")
                out.flush()
            self.reply({
                "id": "c", "object": "chat.completion", "model": "m",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": ANSWER}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            })

    return Handler


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    with open(args.out, "a") as out:
        handler = make_handler(out, threading.Lock(), [0])
        ThreadingHTTPServer(("127.0.0.1", args.port), handler).serve_forever()


if __name__ == "__main__":
    main()
