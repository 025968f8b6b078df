#!/usr/bin/env bash
# Installs Debian's chromium when it is missing: tests/cli_replay_html.rs opens a replay page in
# a real headless browser (DOM dump and screenshot). Quiet and idempotent: a chromium already on
# PATH is used as it is. The test fails, never skips, without a browser, so CI runs this first.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ]; then
  exit 0
fi
sudo=""
if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
echo "setup-chromium: installing chromium from Debian's packages"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1 || {
  $sudo apt-get update -q >/dev/null
  $sudo apt-get install -y -q --no-install-recommends chromium >/dev/null
}
command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ] || {
  echo "setup-chromium: chromium is still missing; the replay browser test cannot run" >&2
  exit 1
}
