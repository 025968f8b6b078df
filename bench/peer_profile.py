#!/usr/bin/env python3
"""System calls and heap allocations per step of `tagloop batch` on the peer benchmark's workload.

usage: bench/peer_profile.py PEERS_PYTHON LABEL=TAGLOOP_BINARY [LABEL=TAGLOOP_BINARY ...]

The workload is ../shared/bench/peer_overhead.py's: its fake server (`fake_llm.py`) and its
episodes in the read_file variant, four `read_file` calls then an answer (five model requests a
task). PEERS_PYTHON is a Python with ../shared/bench/requirements.txt (the fake server needs
aiohttp). For each binary, 20 tasks at concurrency 1 (100 steps):

- `strace -f -c` over the calls issue 48 named (socket, connect, setsockopt, shutdown, close,
  openat, write);
- `valgrind --tool=dhat`: its "Total: N bytes in M blocks" for the 20 tasks and for 1 task; the
  difference over the 95 steps between them is the allocations a step costs, start-up excluded.

Prints one Markdown table. Needs strace and valgrind on PATH. Under valgrind a debug build runs
about 40 s for 20 tasks.
"""
import json, os, re, subprocess, sys, tempfile, time

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'shared', 'bench')
CALLS = ['socket', 'connect', 'setsockopt', 'shutdown', 'close', 'openat', 'write']
TASKS = 20


def workload(py, tmp):
    """The peer benchmark's read_file episodes, their key files and two task lists."""
    scripts = os.path.join(tmp, 'scripts')
    subprocess.run([py, os.path.join(BENCH, 'gen_scripts.py'), '--episodes', str(TASKS + 10), '--out', scripts],
                   check=True, capture_output=True)
    src = json.load(open(os.path.join(scripts, 'xml-react.json')))
    ws = os.path.join(tmp, 'ws')
    os.makedirs(ws)
    src['model'] = 'tagloop-read'
    for ep in src['episodes']:
        for t in ep['turns']:
            t['text'] = t['text'].replace('lookup(key=', 'read_file(path=')
        for _, args in ep['expect']['tool_calls']:
            key = args['key']
            with open(os.path.join(ws, key), 'w') as f:
                f.write(f"{key}={sum(key.encode()) % 1000}")
        ep['task'] = ep['task'].replace('with the lookup tool', 'by reading the file of that name with read_file')
    json.dump(src, open(os.path.join(scripts, 'tagloop-read.json'), 'w'))
    for f in os.listdir(scripts):
        if f != 'tagloop-read.json':
            os.remove(os.path.join(scripts, f))
    for n in (1, TASKS):
        with open(os.path.join(tmp, f'tasks{n}.jsonl'), 'w') as f:
            for ep in src['episodes'][:n]:
                f.write(json.dumps({'id': str(ep['id']), 'task': ep['task']}) + '\n')
    return scripts, ws


def batch(binary, tmp, base, ws, n, tag):
    out = os.path.join(tmp, f'out-{tag}.jsonl')
    return [binary, 'batch', os.path.join(tmp, f'tasks{n}.jsonl'), '--out', out, '--concurrency', '1',
            '--base-url', base, '--model', 'tagloop-read', '--workspace', ws,
            '--session-dir', os.path.join(tmp, f'sess-{tag}'), '--max-steps', '10'], out


def ok_lines(out):
    return sum(1 for line in open(out) if json.loads(line).get('status') == 'ok') if os.path.exists(out) else 0


def strace_counts(binary, tmp, base, ws, label):
    cmd, out = batch(binary, tmp, base, ws, TASKS, f'strace-{label}')
    trace = os.path.join(tmp, f'strace-{label}.txt')
    subprocess.run(['strace', '-f', '-c', '-e', 'trace=' + ','.join(CALLS), '-o', trace] + cmd,
                   check=True, capture_output=True)
    counts = {c: 0 for c in CALLS}
    for line in open(trace):
        f = line.split()
        if len(f) >= 5 and f[-1] in counts and f[3].isdigit():
            counts[f[-1]] = int(f[3])
    return counts, ok_lines(out)


def dhat_total(binary, tmp, base, ws, n, label):
    cmd, _ = batch(binary, tmp, base, ws, n, f'dhat{n}-{label}')
    run = subprocess.run(['valgrind', '--tool=dhat', f'--dhat-out-file={tmp}/dhat{n}-{label}.json'] + cmd,
                         capture_output=True, text=True, check=True)
    m = re.search(r'Total:\s+([\d,]+) bytes in ([\d,]+) blocks', run.stderr)
    return int(m.group(1).replace(',', '')), int(m.group(2).replace(',', ''))


def main():
    py, pairs = sys.argv[1], [a.split('=', 1) for a in sys.argv[2:]]
    tmp = tempfile.mkdtemp(prefix='tagloop-profile-')
    scripts, ws = workload(py, tmp)
    port_file = os.path.join(tmp, 'port')
    server = subprocess.Popen([py, os.path.join(BENCH, 'fake_llm.py'), '--scripts-dir', scripts, '--port', '0',
                               '--port-file', port_file], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if os.path.exists(port_file) and open(port_file).read().strip():
                break
            time.sleep(0.1)
        base = f"http://127.0.0.1:{open(port_file).read().strip()}/v1"
        cols = {}
        for label, binary in pairs:
            counts, good = strace_counts(binary, tmp, base, ws, label)
            b20, n20 = dhat_total(binary, tmp, base, ws, TASKS, label)
            b1, n1 = dhat_total(binary, tmp, base, ws, 1, label)
            steps = 5 * (TASKS - 1)
            cols[label] = [str(counts[c]) for c in CALLS] + [
                f'{n20:,} / {b20:,}', f'{n1:,} / {b1:,}',
                f'{(n20 - n1) / steps:,.0f} / {(b20 - b1) / steps:,.0f}', f'{good}/{TASKS}']
        rows = [f'`{c}` (20 tasks)' for c in CALLS] + [
            'heap blocks / bytes, 20 tasks', 'heap blocks / bytes, 1 task',
            '**allocations per step** (blocks / bytes, (20 − 1 tasks) / 95 steps)', 'correct answers']
        print('| ' + ' | '.join(['100 steps, c=1'] + [l for l, _ in pairs]) + ' |')
        print('|' + '---|' * (1 + len(pairs)))
        for i, r in enumerate(rows):
            print('| ' + ' | '.join([r] + [cols[l][i] for l, _ in pairs]) + ' |')
        print(f'(work files in {tmp})')
    finally:
        server.terminate()
        server.wait()


if __name__ == '__main__':
    main()
