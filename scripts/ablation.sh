#!/usr/bin/env bash
# The agent's ablation (issue 43 item 3): one eval suite, once with tagloop's defaults, once with
# each run-side policy off (`tagloop policies`: those that act in `run`), and once with all off;
# one results file in bench/results/'s format (benchmark "ablation", one configuration per run,
# each with its `policy_off`), which scripts/bench-tables.py turns into an ablation table.
#
#   scripts/ablation.sh --key qwen05 --suite examples/eval/validation.jsonl \
#       --source 'HEADING IN docs/experiments.md' --out bench/results/DATE-qwen05-ablation.json \
#       -- --model qwen05 --base-url http://127.0.0.1:18701/v1 --temperature 0 --allow-write
#
# Everything after `--` goes to each `tagloop eval` as it is (the model, the server, sampling).
# --only a,b runs only these policies off (beside the defaults and all off); --no-all leaves out
# the all-off run (for a slow model, when only the named policies are asked); --tagloop BIN picks
# the binary (default: target/release/tagloop, else tagloop on PATH); --keep DIR keeps each
# eval's JSON report there. Offline check: --key qwen05 with `-- --model scripted:FILE` (the
# figures then say nothing about a model; see docs/lab.md).
set -euo pipefail

key="" suite="" out="" source="" only="" bin="" keep="" all=1
while [ $# -gt 0 ]; do
    case "$1" in
        --key) key="$2"; shift 2 ;;
        --suite) suite="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --source) source="$2"; shift 2 ;;
        --only) only="$2"; shift 2 ;;
        --tagloop) bin="$2"; shift 2 ;;
        --keep) keep="$2"; shift 2 ;;
        --no-all) all=0; shift ;;
        --) shift; break ;;
        *) echo "ablation.sh: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
    esac
done
[ -n "$key" ] && [ -n "$suite" ] && [ -n "$out" ] || {
    echo "ablation.sh: --key, --suite and --out are needed (see the header of $0)" >&2; exit 2; }
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ -z "$bin" ]; then
    if [ -x "$root/target/release/tagloop" ]; then bin="$root/target/release/tagloop"; else bin="tagloop"; fi
fi
work="${keep:-$(mktemp -d)}"
mkdir -p "$work"

# The policies a run has: the lines of `tagloop policies` whose place is `run: …` or `serve and run: …`.
if [ -n "$only" ]; then
    policies="${only//,/ }"
else
    policies="$("$bin" policies | awk '/\((serve and )?run: /{print $1}')"
fi

started="$(date -u +%Y-%m-%dT%H:%MZ)"
runs=("defaults:" )
for p in $policies; do runs+=("$p:$p"); done
if [ "$all" = 1 ]; then runs+=("all:all"); fi
for entry in "${runs[@]}"; do
    name="${entry%%:*}" off="${entry#*:}"
    flags=()
    [ -n "$off" ] && flags=(--policy-off "$off")
    echo "ablation.sh: $name" >&2
    start=$(date +%s)
    # eval exits 3 under --min-pass-rate only; a run's own failures are in its report.
    "$bin" eval "$suite" --json "${flags[@]}" "$@" > "$work/$name.json"
    echo "$(( $(date +%s) - start ))" > "$work/$name.seconds"
done

python3 - "$work" "$out" "$key" "$suite" "$source" "$started" "$*" "${runs[@]}" <<'PY'
import json, os, subprocess, sys
work, out, key, suite, source, started, extra, *runs = sys.argv[1:]
try:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, check=True).stdout.strip()
except Exception:
    commit = None
confs = []
for entry in runs:
    name, off = entry.split(":", 1)
    with open(os.path.join(work, name + ".json"), encoding="utf-8") as f:
        report = json.load(f)
    with open(os.path.join(work, name + ".seconds"), encoding="utf-8") as f:
        wall = int(f.read())
    confs.append({
        "name": "defaults" if not off else ("all policies off" if off == "all" else f"without {off}"),
        "role": "tagloop",
        "kept": False,
        "default": False,
        "policy_off": [off] if off else [],
        "results": [{"category": "validation", "cases": f"{report['tasks']} tasks",
                     "passed": report["passed"], "total": report["tasks"],
                     "turns": report["turns"], "wall_seconds": wall}],
    })
run = {
    "model": key, "benchmark": "ablation",
    "title": f"Ablation of the run-side policies on {os.path.basename(suite)}",
    "started": started, "time": started, "commit": commit,
    "load": os.getloadavg()[0], "setup": extra, "source": source,
    "command": f"scripts/ablation.sh --key {key} --suite {suite} -- {extra}",
    "configurations": confs,
}
with open(out, "w", encoding="utf-8") as f:
    json.dump(run, f, indent=2, ensure_ascii=False)
    f.write("\n")
for c in confs:
    r = c["results"][0]
    print(f"{c['name']:<32} {r['passed']}/{r['total']}")
PY
