#!/usr/bin/env python3
"""Peak memory of `tagloop serve` answering one hostile request (docs/security.md, issue 30).

    python3 scripts/serve-rss.py [target/release/tagloop] SHAPE [COUNT]

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
  objects40k    just under the count of JSON objects a body may hold (39,990 empty objects)
  tools128x760  issue 44's 2.7 MB request: 128 tools of 760 string properties each
  tools128xN    128 tools of N string properties (154: 19,968 subschemas, under the cap of
                20,000; 300: 38,656 objects, under the body's cap of 40,000)
  tiny2mb       a 2 MB body of tiny JSON values (190,000 strings of 8 characters)

COUNT (default 1) requests of SHAPE are sent at once, under `--concurrency COUNT`.
"""
import json
import subprocess
import threading
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
    if shape.startswith("tools128x"):
        props = {f"p{i}": {"type": "string"} for i in range(int(shape.split("x")[1]))}
        tools = [{"type": "function", "function": {"name": f"tool_{t}", "parameters": {"type": "object", "properties": props}}}
                 for t in range(128)]
        return json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": tools})
    if shape == "tiny2mb":
        return '{"model": "m", "messages": [{"role": "user", "content": "hi"}], "x": [' + ",".join(['"abcdefgh"'] * 190_000) + "]}"
    item = "{}" if shape in ("objects4mib", "objects200k") else '"x"'
    n = (limit - 40) // (len(item) + 1)
    if shape == "objects200k":
        n = 200_000 - 10
    if shape == "objects40k":
        item, n = "{}", 40_000 - 10
    return '{"model": "m", "x": [' + ",".join([item] * n) + "]}"


def main():
    args = sys.argv[1:]
    count = int(args.pop()) if args and args[-1].isdigit() else 1
    binary = args[0] if len(args) == 2 else "target/release/tagloop"
    shape = args[-1]
    data = body(shape).encode()
    serve = subprocess.Popen(
        [binary, "serve", "--upstream", "http://127.0.0.1:9/v1", "--listen", "127.0.0.1:0",
         "--concurrency", str(max(count, 1))],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = serve.stdout.readline()
        base = line.strip().rsplit(" ", 1)[-1]
        before = peak_kib(serve.pid)
        started = time.monotonic()
        statuses = []

        def send():
            request = urllib.request.Request(f"{base}/v1/chat/completions", data=data,
                                             headers={"content-type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=120) as r:
                    statuses.append(r.status)
            except urllib.error.HTTPError as e:
                statuses.append(e.code)

        senders = [threading.Thread(target=send) for _ in range(count)]
        for t in senders:
            t.start()
        for t in senders:
            t.join()
        status = ",".join(str(s) for s in sorted(set(statuses)))
        took = time.monotonic() - started
        after = peak_kib(serve.pid)
        print(f"{shape} x{count}: {len(data)} B, HTTP {status}, {took:.2f} s, peak RSS "
              f"{before // 1024} -> {after // 1024} MiB (+{(after - before) // 1024} MiB)")
    finally:
        serve.terminate()
        serve.wait(timeout=10)


if __name__ == "__main__":
    main()
