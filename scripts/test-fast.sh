#!/usr/bin/env bash
# The fast, offline test command: every test that needs nothing but cargo, for the edit-test
# loop. CI runs the full one, scripts/test.sh, which this does not replace.
#
# Left out (each needs something installed or running, and scripts/test.sh sets it up):
#   * tests/real_models.rs    the real-model lab (llama-server and two GGUF models);
#   * tests/queue_redis.rs    a real redis-server;
#   * tests/security_queue.rs a real redis-server (the queue's hostile-entry tests);
#   * tests/serve_responses_redis.rs a real redis-server (serve's stored Responses in Redis);
#   * tests/tools_mcp_node.rs Node and the official MCP filesystem server;
#   * tests/cli_replay_html.rs a headless chromium;
#   * tests/serve_clients.rs, tests/serve_passthrough_clients.rs the Python clients' venv
#     (scripts/setup-pyclients.sh);
#   * the doctests            offline, but each example compiles as its own crate: the slowest
#                             part of a cold build.
# Those binaries are left out by name, not skipped from inside: in the full run they still
# fail when what they need is missing (tests/real_models.rs alone skips without the lab, except
# on CI, where it fails).
#
# The lib and bin unit tests of both crates (tagloop, tagloop-protocol) run too.
#
# Arguments go to the test binaries: `scripts/test-fast.sh eval` runs the tests whose names
# contain "eval".
set -euo pipefail
cd "$(dirname "$0")/.."

needs_setup=(real_models queue_redis security_queue serve_responses_redis tools_mcp_node cli_replay_html serve_clients serve_passthrough_clients)

# Every integration test binary of the workspace's crates (the protocol crate may grow its own).
shopt -s nullglob
targets=()
for file in tests/*.rs */tests/*.rs; do
  name=$(basename "$file" .rs)
  skip=
  for s in "${needs_setup[@]}"; do
    if [ "$name" = "$s" ]; then skip=1; fi
  done
  if [ -z "$skip" ]; then targets+=(--test "$name"); fi
done

# tests/tools_mcp.rs runs the Rust MCP test server from examples/; `--test` filters do not
# build examples, so build it first.
cargo build --quiet --example mcp_test_server
cargo test --lib --bins "${targets[@]}" -- "$@"
if [ -x ../shared/tools/check-corpus ]; then
  cargo build --quiet
  ../shared/tools/check-corpus --bin "${CARGO_TARGET_DIR:-target}/debug/tagloop"
fi
