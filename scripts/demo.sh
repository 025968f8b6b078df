#!/usr/bin/env bash
# The main job: one agent episode on a fresh copy of examples/demo/workspace.
#
# With no server configured it replays a recorded episode with the offline scripted model, so it
# needs no network; the file tools still do the real work. To run the same task against a real
# server, set TAGLOOP_MODEL (and OPENAI_BASE_URL, OPENAI_API_KEY), or pass --model/--base-url:
#   TAGLOOP_MODEL=qwen2.5:7b-instruct OPENAI_BASE_URL=http://127.0.0.1:11434/v1 scripts/demo.sh
# Extra arguments go to `tagloop run` (e.g. --json, --api completions).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet
bin=${CARGO_TARGET_DIR:-target}/debug/tagloop
ws=$(mktemp -d "${TMPDIR:-/tmp}/tagloop-demo.XXXXXX")
cp -R examples/demo/workspace/. "$ws/"
model_args=()
if [ -z "${TAGLOOP_MODEL:-}" ] && ! printf '%s\n' "$@" | grep -q -- '^--model'; then
  model_args=(--model scripted:examples/demo/episode.script)
fi
status=0
"$bin" run --workspace "$ws" --allow-write --max-steps 8 "${model_args[@]}" "$@" - < examples/demo/task.txt || status=$?
echo
echo "── workspace $ws ──"
if [ -f "$ws/action-items.md" ]; then cat "$ws/action-items.md"; else echo "(no action-items.md was written)"; fi
exit "$status"
