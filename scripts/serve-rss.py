#!/usr/bin/env python3
"""Peak memory of `tagloop serve` answering one hostile request (docs/security.md, issue 30).

    python3 scripts/serve-rss.py [target/release/tagloop] SHAPE

Starts `tagloop serve` on a free loopback port in front of an upstream that is not there
(127.0.0.1:9: every request it would pass on fails at once), sends one request of SHAPE, and
prints the answer's status, the seconds it took, and the serve process's peak resident memory
(VmHWM) before and after. Shapes:

  patterns400   the issue's 24 KB request: 400 patterns like (?=x)\\w{100}yN
  patterns30    30 patterns like (?=x)\\w{100}yN (under the cap: refused for their lookaround)
  patterns32    32 patterns (the cap), each close to the size limit: ^.{1,1000}$N
  objects4mib   a 4 MiB body of empty JSON objects (parsed, then passed through)
  strings4mib   a 4 MiB body of one-character strings
  objects200k   just under the count of JSON values a body may hold, as empty objects
"""
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request


def peak_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def body(shape):
    limit = 4 * 1024 * 1024 - 64
    shapes = {"patterns400": (400, r"(?=x)\w{100}yN"), "patterns30": (30, r"(?=x)\w{100}yN"),
              "patterns32": (32, "^.{1,1000}$N")}
    if shape in shapes:
        count, pattern = shapes[shape]
        props = {f"p{i}": {"type": "string", "pattern": pattern.replace("N", str(i))} for i in range(count)}
        tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": props}}}]
        return json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": tools})
    item = "{}" if shape in ("objects4mib", "objects200k") else '"x"'
    n = (limit - 40) // (len(item) + 1)
    if shape == "objects200k":
        n = 200_000 - 10
    return '{"model": "m", "x": [' + ",".join([item] * n) + "]}"


def main():
    args = sys.argv[1:]
    binary = args[0] if len(args) == 2 else "target/release/tagloop"
    shape = args[-1]
    data = body(shape).encode()
    serve = subprocess.Popen(
        [binary, "serve", "--upstream", "http://127.0.0.1:9/v1", "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = serve.stdout.readline()
        base = line.strip().rsplit(" ", 1)[-1]
        before = peak_kib(serve.pid)
        started = time.monotonic()
        request = urllib.request.Request(f"{base}/v1/chat/completions", data=data,
                                         headers={"content-type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=120) as r:
                status = r.status
        except urllib.error.HTTPError as e:
            status = e.code
        took = time.monotonic() - started
        after = peak_kib(serve.pid)
        print(f"{shape}: {len(data)} B, HTTP {status}, {took:.2f} s, peak RSS "
              f"{before // 1024} -> {after // 1024} MiB (+{(after - before) // 1024} MiB)")
    finally:
        serve.terminate()
        serve.wait(timeout=10)


if __name__ == "__main__":
    main()
