#!/usr/bin/env bash
# BFCL through the openai SDK against an OpenAI-compatible server, or through the anthropic SDK
# against tagloop serve's /v1/messages, or through the openai SDK's responses.create against its
# /v1/responses, or several side by side (bench/bfcl/run.py says how cases are scored). Out of
# CI's default path: a run costs minutes of generation.
#
#   scripts/bfcl.sh --base-url http://127.0.0.1:PORT/v1 --model NAME \
#       [--face openai|anthropic|responses|both|all] \
#       [--category simple_python,multiple,parallel,irrelevance] [--range 0:30 | --split dev|validation]
#       [--json FILE]
#   --split dev is cases 0-49 of each category (tune on these); --split validation is cases 50-79,
#   printed as totals per category only (keep or reject a change on these; docs/development.md)
#   scripts/bfcl.sh --setup      only build (or reuse) the venv
#
# The venv: $TAGLOOP_BFCL_DIR (default ${XDG_CACHE_HOME:-~/.cache}/tagloop-bfcl), from PyPI only,
# pinned by bench/bfcl/requirements.txt, reused while that file is unchanged.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
reqs=$here/bench/bfcl/requirements.txt
dir=${TAGLOOP_BFCL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tagloop-bfcl}
py=$dir/bin/python
stamp=$dir/tagloop-requirements.txt

if ! { [ -x "$py" ] && cmp -s "$reqs" "$stamp"; }; then
  echo "bfcl: installing bfcl-eval and the runner's few dependencies into $dir" >&2
  rm -rf "$dir"
  python3 -m venv "$dir"
  # --no-deps: the list is complete, and bfcl-eval's own declared dependencies are exactly what
  # must not come in (see the requirements file).
  "$py" -m pip install --quiet --disable-pip-version-check --require-virtualenv \
    --no-deps --only-binary=:all: -r "$reqs"
  cp "$reqs" "$stamp"
fi
if [ "${1:-}" = "--setup" ]; then
  echo "bfcl: ready ($py)"
  exit 0
fi
exec "$py" "$here/bench/bfcl/run.py" "$@"
