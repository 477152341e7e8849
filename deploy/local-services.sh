#!/usr/bin/env bash
# Makes sure PostgreSQL, Redis and RabbitMQ answer on loopback, installing them from Debian's
# packages and starting them by hand when they do not (no Docker, no systemd needed).
# Idempotent: whatever already answers is left alone. Needs root only for what it has to install.
#
# Afterwards:
#   PostgreSQL  postgres://latchkey:latchkey@127.0.0.1:5432/postgres  (role with CREATEDB)
#   Redis       redis://127.0.0.1:6379
#   RabbitMQ    amqp://guest:guest@127.0.0.1:5672 (management API on 127.0.0.1:15672)
set -euo pipefail

say() { echo "local-services: $*" >&2; }
fail() { say "ERROR: $*"; exit 1; }

pg_up() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }
redis_up() { [ "$(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" = "PONG" ]; }
rabbit_up() { rabbitmqctl -q status >/dev/null 2>&1 && rabbitmq_mgmt_up; }
rabbitmq_mgmt_up() {
  python3 - <<'PY' 2>/dev/null
import base64, sys, urllib.request
req = urllib.request.Request("http://127.0.0.1:15672/api/overview")
req.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
sys.exit(0 if urllib.request.urlopen(req, timeout=2).status == 200 else 1)
PY
}

need=()
command -v pg_ctlcluster >/dev/null && ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need+=(postgresql)
command -v redis-server >/dev/null || need+=(redis-server)
command -v rabbitmq-server >/dev/null || need+=(rabbitmq-server)
if [ ${#need[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || fail "missing ${need[*]} and not root: install them with apt-get"
  say "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null || fail "apt-get update failed"
  # The packages' own start scripts are refused without systemd ("policy-rc.d denied"); expected.
  apt-get install -y -qq "${need[@]}" >/dev/null 2>&1 || fail "apt-get install ${need[*]} failed"
fi

if ! pg_up; then
  version=$(ls /etc/postgresql | sort -n | tail -n 1)
  [ -n "$version" ] || fail "no PostgreSQL cluster under /etc/postgresql"
  say "starting PostgreSQL $version"
  pg_ctlcluster "$version" main start || fail "pg_ctlcluster $version main start failed"
  for _ in $(seq 1 30); do pg_up && break; sleep 1; done
  pg_up || fail "PostgreSQL did not become ready"
fi
# Debian's pg_hba asks for a password on 127.0.0.1, so tests use a role that has one.
su postgres -c "psql -qtAc \"SELECT 1 FROM pg_roles WHERE rolname = 'latchkey'\"" | grep -q 1 ||
  su postgres -c "psql -qc \"CREATE ROLE latchkey LOGIN CREATEDB PASSWORD 'latchkey'\"" >/dev/null ||
  fail "could not create the latchkey role"

if ! redis_up; then
  say "starting Redis"
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save '' --appendonly no >/dev/null ||
    fail "redis-server failed to start"
  for _ in $(seq 1 20); do redis_up && break; sleep 0.5; done
  redis_up || fail "Redis did not become ready"
fi

if ! rabbitmqctl -q status >/dev/null 2>&1; then
  say "starting RabbitMQ"
  # The management plugin gives tests a fast HTTP API for per-run vhosts.
  rabbitmq-plugins --offline enable rabbitmq_management >/dev/null || fail "could not enable rabbitmq_management"
  rabbitmq-server -detached >/dev/null 2>&1 || true
  # `await_startup` fails at once while the detached node has not yet registered with epmd,
  # so wait for the node to answer at all before waiting for its boot to finish.
  for _ in $(seq 1 120); do rabbitmqctl -q ping >/dev/null 2>&1 && break; sleep 1; done
  if ! rabbitmqctl -q await_startup --timeout 120 >/dev/null 2>&1; then
    tail -n 40 /var/log/rabbitmq/*.log >&2 2>/dev/null || true
    fail "RabbitMQ did not start"
  fi
fi
if ! rabbitmq_mgmt_up; then
  rabbitmq-plugins enable rabbitmq_management >/dev/null || fail "could not enable rabbitmq_management"
  for _ in $(seq 1 30); do rabbitmq_mgmt_up && break; sleep 1; done
  rabbitmq_mgmt_up || fail "RabbitMQ management API did not come up"
fi
say "PostgreSQL, Redis and RabbitMQ are up"
