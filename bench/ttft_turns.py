#!/usr/bin/env python3
"""Seconds to the first token of each turn of `tagloop run`, behind bench/delay_proxy.py.

usage: bench/ttft_turns.py --upstream HOST:PORT [--delay-ms 25] [--runs 3]
                           --bin LABEL=TAGLOOP [--bin LABEL=TAGLOOP ...] -- RUN_ARGS...

RUN_ARGS are `tagloop run`'s arguments (model, workspace, flags, the task); the driver adds
`--base-url http://127.0.0.1:PROXY/v1 --events - --session-dir TMP`. For each run (the binaries
take turns, so both see the same load), a fresh proxy with a fresh log sits between tagloop and
the server at HOST:PORT.

Time to first token of a turn, as the user of tagloop feels it: from the `turn_started` event to
the turn's first `text_delta` event, both stamped by this driver when their line arrives on
tagloop's stdout (tagloop writes each event line as it happens). It covers tagloop building the
request, a new connection when one is opened (the proxy's handshake delay), the request's
delayed way up, the server's prompt processing and its first token. The proxy's log gives the
TCP connections each run opened and its requests.

Prints, per binary: turns per run, connections and requests per run, and the median (and each)
time to first token of turns 2..N over all runs, in milliseconds.
"""
import argparse, json, os, socket, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    return port


def one_run(binary, run_args, upstream, delay_ms, tmp, tag):
    port, log = free_port(), os.path.join(tmp, f'proxy-{tag}.jsonl')
    proxy = subprocess.Popen([sys.executable, os.path.join(HERE, 'delay_proxy.py'), '--listen', str(port),
                              '--upstream', upstream, '--delay-ms', str(delay_ms), '--log', log])
    try:
        for _ in range(100):
            try:
                socket.create_connection(('127.0.0.1', port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        # The readiness probe above is one connection: the log restarts after it.
        time.sleep(0.1)
        open(log, 'w').close()
        cmd = [binary, 'run', '--base-url', f'http://127.0.0.1:{port}/v1', '--events', '-',
               '--session-dir', os.path.join(tmp, 'sessions')] + run_args
        child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        ttft, started, status = [], None, None
        for line in child.stdout:
            now = time.monotonic()
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            kind = ev.get('type') if isinstance(ev, dict) else None
            if kind == 'turn_started':
                started = now
            elif kind == 'text_delta' and started is not None:
                ttft.append(1000 * (now - started))
                started = None
            elif kind == 'finished':
                status = ev['outcome'].get('status')
        child.wait()
    finally:
        proxy.terminate()
        proxy.wait()
    events = [json.loads(l) for l in open(log)]
    conns = sum(1 for e in events if e['ev'] == 'conn')
    reqs = sum(1 for e in events if e['ev'] == 'req')
    return ttft, conns, reqs, status


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--upstream', required=True)
    ap.add_argument('--delay-ms', type=float, default=25.0)
    ap.add_argument('--runs', type=int, default=3)
    ap.add_argument('--bin', action='append', required=True)
    ap.add_argument('run_args', nargs=argparse.REMAINDER)
    a = ap.parse_args()
    run_args = a.run_args[1:] if a.run_args[:1] == ['--'] else a.run_args
    bins = [b.split('=', 1) for b in a.bin]
    tmp = tempfile.mkdtemp(prefix='tagloop-ttft-')
    got = {label: [] for label, _ in bins}
    for r in range(a.runs):
        for label, binary in bins:
            got[label].append(one_run(binary, run_args, a.upstream, a.delay_ms, tmp, f'{label}-{r}'))
    print(f'| {a.delay_ms:g} ms per round trip | turns per run | connections per run | requests per run '
          f'| median TTFT, turns 2..N (ms) | each TTFT of turns 2..N (ms) | turn 1 TTFT (ms) | status |')
    print('|---|---|---|---|---|---|---|---|')
    for label, _ in bins:
        runs = got[label]
        later = [t for ttft, *_ in runs for t in ttft[1:]]
        med = f'{statistics.median(later):.1f}' if later else '–'
        print(f"| {label} | {', '.join(str(len(t)) for t, *_ in runs)} | {', '.join(str(c) for _, c, _, _ in runs)} "
              f"| {', '.join(str(q) for *_, q, _ in runs)} | **{med}** | {' '.join(f'{t:.0f}' for t in later)} "
              f"| {' '.join(f'{t[0]:.0f}' for t, *_ in runs if t)} | {', '.join(str(s) for *_, s in runs)} |")
    print(f'(work files in {tmp})')


if __name__ == '__main__':
    main()
