"""tagloop's agent beside the agents a user would pick instead, on the same real model (issue 31).

Three agents, the same model behind one llama-server (started here, on a free loopback port, with
`--jinja` so that llama.cpp's native tool calling works), the same tools (read a file, list a
folder, search the files), the same tasks, the same step limit and token budget per turn,
temperature 0:

* `tagloop run` with its defaults (the text protocol, turn grammar, context fitting);
* smolagents' `ToolCallingAgent` over `OpenAIServerModel` (the server's native tool calls);
* smolagents' `CodeAgent` over the same model (Python code actions).

Every run gets a fresh copy of the task's workspace. A run is *right* when its final answer passes
the task's check (the checks of `tagloop eval`: regex, contains, equals). Printed, and written to
`--json`: per agent, right answers, wall time in all, turns (model requests), and runs that hit
the step limit; with `--write-benchmarks FILE`, the table replaces the text between the markers
`<!-- sidebyside:KEY -->` and `<!-- /sidebyside:KEY -->` in FILE (KEY is `--key`: the tables of
qwen05 and qwen15 are in docs/experiments.md). A run's figures for BENCHMARKS.md's tables go into
bench/results/ as JSON (bench/results/README.md).

    python3 -m venv ~/.cache/tagloop-sidebyside-venv
    ~/.cache/tagloop-sidebyside-venv/bin/pip install -r bench/sidebyside/requirements.txt
    cargo build --release
    ~/.cache/tagloop-sidebyside-venv/bin/python bench/sidebyside/run.py \\
        --tagloop target/release/tagloop --gguf-key QWEN05_GGUF

The lab (`scripts/real-models.sh`) provides llama-server and the models (`lab.env`).
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from importlib.metadata import version

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# The tasks: the read-only tasks of the project's suite that a workspace agent with the three
# tools can do, and one that needs no tool (examples/eval/suite.jsonl holds their checks).
TASK_IDS = ["read-codename", "read-port", "count-notes", "count-docs",
            "search-todo", "csv-total", "json-age", "direct-math"]


# --- the tools, for smolagents: what tagloop's read_file, list_dir and search_files answer ----

def make_tools(root):
    from smolagents import tool

    def inside(path):
        full = os.path.realpath(os.path.join(root, path or "."))
        if full != root and not full.startswith(root + os.sep):
            raise ValueError(f"{path} is outside the workspace")
        return full

    @tool
    def read_file(path: str, start_line: int = 1, end_line: int = 0) -> str:
        """Read a text file from the workspace and return its content exactly (no line numbers).

        Args:
            path: File path, relative to the workspace root.
            start_line: First line to read (1-based). Default: 1.
            end_line: Last line to read (inclusive); 0 reads to the end of the file.
        """
        with open(inside(path), encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines(keepends=True)
        end = end_line if end_line and end_line > 0 else len(lines)
        return "".join(lines[max(start_line, 1) - 1:end])

    @tool
    def list_dir(path: str = ".") -> str:
        """List a folder of the workspace (default: the workspace root). Folders end with `/`.

        Args:
            path: Folder to list, relative to the workspace root.
        """
        full = inside(path)
        names = sorted(n + ("/" if os.path.isdir(os.path.join(full, n)) else "")
                       for n in os.listdir(full))
        return "\n".join(names) if names else "(empty folder)"

    @tool
    def search_files(pattern: str, path: str = ".") -> str:
        """Search file contents with a regular expression. Prints one line per match as
        `path:line: text`.

        Args:
            pattern: Regular expression to look for in each line.
            path: Folder or file to search in. Default: the whole workspace.
        """
        rx = re.compile(pattern)
        start = inside(path)
        files = [start] if os.path.isfile(start) else [
            os.path.join(d, n) for d, _, ns in sorted(os.walk(start)) for n in sorted(ns)]
        out = []
        for f in files:
            try:
                with open(f, encoding="utf-8") as h:
                    for i, line in enumerate(h, 1):
                        if rx.search(line):
                            out.append(f"{os.path.relpath(f, root)}:{i}: {line.rstrip()}")
            except UnicodeDecodeError:
                continue
        return "\n".join(out) if out else "no match"

    return [read_file, list_dir, search_files]


# --- checks --------------------------------------------------------------------------------

def passes(check, answer):
    if isinstance(check, list):
        return all(passes(c, answer) for c in check)
    text = answer if isinstance(answer, str) else json.dumps(answer)
    if "regex" in check:
        return re.search(check["regex"], text) is not None
    if "contains" in check:
        return check["contains"] in text
    if "equals" in check:
        return text.strip() == str(check["equals"]).strip()
    raise ValueError(f"unknown check {check}")


# --- the three agents ------------------------------------------------------------------------

def run_tagloop(args, base_url, task, ws, extra=()):
    sessions = os.path.join(os.path.dirname(ws), "sessions")
    cmd = [args.tagloop, "run", "--json", "--quiet", "--session-dir", sessions, *extra,
           "--base-url", base_url, "--model", "lab", "--temperature", "0",
           "--max-steps", str(args.max_steps), "--max-tokens", str(args.max_tokens),
           "--workspace", ws, task]
    env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(os.path.dirname(ws), "noconf"))
    env.pop("OPENAI_API_KEY", None)
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"answer": None, "turns": 0, "step_limit": False,
                "error": f"killed after {args.timeout} s"}
    try:
        o = json.loads(out.stdout)
    except json.JSONDecodeError:
        return {"answer": None, "turns": 0, "step_limit": False,
                "error": out.stderr.strip()[-300:]}
    return {"answer": o.get("final"), "turns": o.get("llm_calls", 0),
            "step_limit": o.get("status") == "max_steps", "status": o.get("status")}


def run_smolagents(kind, args, base_url, task, ws):
    from smolagents import CodeAgent, OpenAIServerModel, ToolCallingAgent
    from smolagents.monitoring import LogLevel
    model = OpenAIServerModel(model_id="lab", api_base=base_url, api_key="none",
                              temperature=0, max_tokens=args.max_tokens)
    cls = ToolCallingAgent if kind == "toolcalling" else CodeAgent
    agent = cls(tools=make_tools(os.path.realpath(ws)), model=model,
                max_steps=args.max_steps, verbosity_level=LogLevel.OFF)
    try:
        r = agent.run(task, return_full_result=True)
    except Exception as e:  # a framework error is a wrong run, and said so
        return {"answer": None, "turns": 0, "step_limit": False, "error": repr(e)[:300]}
    turns = sum(1 for s in agent.memory.steps if type(s).__name__ in ("ActionStep", "FinalAnswerStep")
                and getattr(s, "model_output_message", None) is not None)
    return {"answer": r.output, "turns": turns, "step_limit": r.state == "max_steps_error",
            "status": r.state}


AGENTS = {
    "tagloop": lambda a, u, t, w: run_tagloop(a, u, t, w),
    "tagloop-free": lambda a, u, t, w: run_tagloop(a, u, t, w, ["--grammar", "off"]),
    "toolcalling": lambda a, u, t, w: run_smolagents("toolcalling", a, u, t, w),
    "code": lambda a, u, t, w: run_smolagents("code", a, u, t, w),
}
NAMES = {
    "tagloop": "tagloop run (defaults)",
    "tagloop-free": "tagloop run --grammar off",
    "toolcalling": "smolagents ToolCallingAgent",
    "code": "smolagents CodeAgent",
}


# --- llama-server ----------------------------------------------------------------------------

def lab_env():
    lab = os.environ.get("TAGLOOP_LAB_DIR", os.path.expanduser("~/.cache/tagloop-lab"))
    with open(os.path.join(lab, "lab.env")) as f:
        return dict(line.strip().split("=", 1) for line in f if "=" in line)


def start_server(args):
    env = lab_env()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [env["LLAMA_SERVER"], "-m", env[args.gguf_key], "--jinja", "--host", "127.0.0.1",
           "--port", str(port), "-c", str(args.ctx), "-t", str(args.threads), "--parallel", "1",
           "--no-webui"]
    log = open(os.path.join(tempfile.gettempdir(), f"sidebyside-llama-{port}.log"), "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"llama-server exited: see {log.name}")
        try:
            with urllib.request.urlopen(base + "/health", timeout=2) as r:
                if r.status == 200:
                    return proc, base + "/v1"
        except OSError:
            time.sleep(0.5)
    proc.kill()
    sys.exit("llama-server did not start in 120 s")


# --- the table --------------------------------------------------------------------------------

def table(summary):
    rows = ["| agent | right | wall time | turns | runs at the step limit |",
            "|---|---|---|---|---|"]
    for s in summary:
        rows.append(f"| {NAMES[s['agent']]} | {s['right']}/{s['runs']} | {s['seconds']:.0f} s "
                    f"| {s['turns']} | {s['step_limit']} |")
    return "\n".join(rows)


def write_into(path, key, text):
    with open(path) as f:
        doc = f.read()
    start, end = f"<!-- sidebyside:{key} -->", f"<!-- /sidebyside:{key} -->"
    a, b = doc.find(start), doc.find(end)
    if a < 0 or b < a:
        sys.exit(f"{path} has no {start} … {end} markers")
    with open(path, "w") as f:
        f.write(doc[:a + len(start)] + "\n" + text + "\n" + doc[b:])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tagloop", required=True, help="the tagloop binary")
    ap.add_argument("--gguf-key", default="QWEN05_GGUF", help="the model's key in lab.env")
    ap.add_argument("--agents", default="tagloop,tagloop-free,toolcalling,code")
    ap.add_argument("--time-limit", type=float, default=0,
                    help="seconds after which no further task is started (0: none)")
    ap.add_argument("--max-steps", type=int, default=6)
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--ctx", type=int, default=8192, help="llama-server's -c")
    ap.add_argument("--threads", type=int, default=2,
                    help="llama-server's -t (1 on cores other work shares: two threads that wait "
                         "for each other at every layer crawl when either is descheduled)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds a tagloop run may take")
    ap.add_argument("--json", help="write every run's record here (JSON Lines)")
    ap.add_argument("--write-benchmarks", help="put the table between the markers in this file")
    ap.add_argument("--key", default="qwen05")
    args = ap.parse_args()

    suite = [json.loads(line) for line in open(os.path.join(ROOT, "examples/eval/suite.jsonl"))
             if line.strip()]
    tasks = [t for i in TASK_IDS for t in suite if t["id"] == i]
    fixture = os.path.join(ROOT, "examples/eval/fixture")
    proc, base_url = start_server(args)
    # A stop (kill PID) goes through `finally`, so the server never outlives the run.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    agents = args.agents.split(",")
    records, done, started_all = [], 0, time.perf_counter()
    try:
        # Task by task, every agent in turn: a machine whose load changes during the run (other
        # work on the same cores) weighs on all agents alike, and a run stopped by --time-limit
        # still compares them on the same tasks.
        for t in tasks:
            if args.time_limit and time.perf_counter() - started_all > args.time_limit:
                break
            for agent in agents:
                with tempfile.TemporaryDirectory() as d:
                    ws = os.path.join(d, "ws")
                    shutil.copytree(fixture, ws)
                    started = time.perf_counter()
                    r = AGENTS[agent](args, base_url, t["task"], ws)
                    took = time.perf_counter() - started
                right = r["answer"] is not None and passes(t["check"], r["answer"])
                rec = {"agent": agent, "id": t["id"], "right": right, "seconds": round(took, 1),
                       **{k: (str(v) if k == "answer" and v is not None else v)
                          for k, v in r.items()}}
                records.append(rec)
                print(json.dumps(rec), file=sys.stderr, flush=True)
            done += 1
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    summary = []
    for agent in agents:
        mine = [r for r in records if r["agent"] == agent and
                r["id"] in {t["id"] for t in tasks[:done]}]
        summary.append({"agent": agent, "runs": len(mine),
                        "right": sum(r["right"] for r in mine),
                        "seconds": sum(r["seconds"] for r in mine),
                        "turns": sum(r["turns"] for r in mine),
                        "step_limit": sum(bool(r["step_limit"]) for r in mine)})
    if args.json:
        with open(args.json, "w") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")
    t = table(summary)
    if done < len(tasks):
        t += f"\n\n(stopped by --time-limit after {done} of {len(tasks)} tasks)"
    print(t)
    print(f"smolagents {version('smolagents')}, openai {version('openai')}, "
          f"{subprocess.run([args.tagloop, '--version'], capture_output=True, text=True).stdout.strip()}")
    if args.write_benchmarks:
        write_into(args.write_benchmarks, args.key, t)


if __name__ == "__main__":
    main()
