#!/usr/bin/env bash
# The test command (README): installs what the tests need, runs every test, then checks the
# shared corpus when ../shared is beside the checkout (it is on CI).
set -euo pipefail
cd "$(dirname "$0")/.."
# The official MCP filesystem server (pinned in tests/mcp-node) for its integration test.
if [ -x scripts/setup-mcp-node.sh ]; then scripts/setup-mcp-node.sh; fi
cargo test
if [ -x ../shared/tools/check-corpus ]; then
  cargo build --quiet
  ../shared/tools/check-corpus --bin "${CARGO_TARGET_DIR:-target}/debug/tagloop"
else
  echo "../shared/tools/check-corpus not found: corpus check skipped"
fi
