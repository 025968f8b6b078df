#!/usr/bin/env bash
# The Python clients that tests/serve_clients.rs runs against `tagloop serve` (the `openai` SDK and
# LangChain's ChatOpenAI), in a virtual environment of their own, from PyPI only, pinned whole by
# tests/py/requirements.txt.
#
#   scripts/setup-pyclients.sh          install (or reuse) the venv, then print its python
#   scripts/setup-pyclients.sh --check  print its python if it is there and current, else exit 1
#
# Where: $TAGLOOP_PY_DIR (default ${XDG_CACHE_HOME:-~/.cache}/tagloop-py), outside the checkout so
# that `cargo clean` or a fresh worktree does not throw it away. The tests look in the same place.
# A venv built from the same requirements file is reused (a copy of the file is kept beside it);
# any change to the file rebuilds it from scratch, so no stale package survives an update.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
reqs=$here/tests/py/requirements.txt
dir=${TAGLOOP_PY_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tagloop-py}
py=$dir/bin/python
stamp=$dir/tagloop-requirements.txt

current() { [ -x "$py" ] && cmp -s "$reqs" "$stamp"; }

if [ "${1:-}" = "--check" ]; then
  if current; then
    echo "PYCLIENTS_PYTHON=$py"
    exit 0
  fi
  echo "setup-pyclients: the client venv is missing or stale in $dir: run scripts/setup-pyclients.sh" >&2
  exit 1
fi

if current; then
  echo "setup-pyclients: already installed"
  echo "PYCLIENTS_PYTHON=$py"
  exit 0
fi

if ! command -v python3 >/dev/null 2>&1; then
  echo "setup-pyclients: python3 (>= 3.9) is needed" >&2
  exit 1
fi
echo "setup-pyclients: installing the pinned clients into $dir"
rm -rf "$dir"
python3 -m venv "$dir"
# The list is complete (every dependency pinned), so nothing is resolved: --no-deps installs
# exactly it; wheels only, so no package's build script runs; `pip check` then proves the pins
# agree with each other.
"$py" -m pip install --quiet --disable-pip-version-check --require-virtualenv \
  --no-deps --only-binary=:all: -r "$reqs"
"$py" -m pip check --disable-pip-version-check >/dev/null
cp "$reqs" "$stamp"
echo "PYCLIENTS_PYTHON=$py"
