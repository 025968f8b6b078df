#!/usr/bin/env sh
# Install the pinned official MCP servers used by tests/tools_mcp_node.rs
# (tests/mcp-node/package.json + package-lock.json) into tests/mcp-node/node_modules.
# Idempotent: when node_modules already matches the lockfile, nothing is downloaded.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
dir="$here/tests/mcp-node"
if ! command -v npm >/dev/null 2>&1; then
    echo "setup-mcp-node: npm is not installed (Node.js >= 18 is needed)" >&2
    exit 1
fi
marker="$dir/node_modules/.package-lock.json"
if [ -f "$marker" ] && [ -f "$dir/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js" ] \
    && cmp -s "$dir/package-lock.json" "$dir/node_modules/.tagloop-lock-copy" 2>/dev/null; then
    echo "setup-mcp-node: already installed"
    exit 0
fi
npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error
cp "$dir/package-lock.json" "$dir/node_modules/.tagloop-lock-copy"
echo "setup-mcp-node: installed into $dir/node_modules"
