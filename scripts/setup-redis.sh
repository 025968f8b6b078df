#!/usr/bin/env bash
# Installs redis-server (Debian's package) when no redis-server is on PATH: tests/queue_redis.rs
# starts real servers on loopback. Any Redis >= 6.2 already on PATH is used as it is.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1 || [ -x /usr/bin/redis-server ]; then
  exit 0
fi
sudo=""
if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
echo "setup-redis: installing redis-server from Debian's packages"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get install -y -q redis-server >/dev/null 2>&1 || {
  $sudo apt-get update -q >/dev/null
  $sudo apt-get install -y -q redis-server >/dev/null
}
# Debian starts a system service on port 6379; the tests start their own servers.
$sudo systemctl disable --now redis-server >/dev/null 2>&1 || true
command -v redis-server >/dev/null 2>&1 || [ -x /usr/bin/redis-server ] || {
  echo "setup-redis: redis-server is still missing; the queue tests cannot run" >&2
  exit 1
}
