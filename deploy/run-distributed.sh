#!/usr/bin/env bash
# Starts the full distributed stack on loopback: one process per component (`latchkey serve`),
# each service with its own PostgreSQL database, events over RabbitMQ. For local production-like
# runs; Ctrl-C stops everything. Creates a project and prints its keys.
#
#   bash deploy/run-distributed.sh     # builds release, gateway on 127.0.0.1:8102
#   LATCHKEY_BIN=target/debug/latchkey bash deploy/run-distributed.sh   # use a built binary
set -euo pipefail
cd "$(dirname "$0")/.."

bash deploy/local-services.sh
bin=${LATCHKEY_BIN:-}
if [ -z "$bin" ]; then
  cargo build --release --bin latchkey
  bin=target/release/latchkey
fi

prefix=${LATCHKEY_STACK_DB_PREFIX:-latchkey_local}
pg=postgres://latchkey:latchkey@127.0.0.1:5432
for svc in auth teams contacts webhooks; do
  PGPASSWORD=latchkey psql -h 127.0.0.1 -U latchkey -d postgres -qtAc \
    "SELECT 1 FROM pg_database WHERE datname = '${prefix}_${svc}'" | grep -q 1 ||
    PGPASSWORD=latchkey psql -h 127.0.0.1 -U latchkey -d postgres -qc "CREATE DATABASE ${prefix}_${svc}"
done

export LATCHKEY_INTERNAL_TOKEN=${LATCHKEY_INTERNAL_TOKEN:-$(head -c 32 /dev/urandom | base64 | tr -dc 'a-zA-Z0-9')}
export LATCHKEY_SECRETS_KEY=${LATCHKEY_SECRETS_KEY:-$(head -c 32 /dev/urandom | base64)}
export LATCHKEY_AMQP_URL=${LATCHKEY_AMQP_URL:-amqp://guest:guest@127.0.0.1:5672/%2f}
export LATCHKEY_PUBLIC_URL=${LATCHKEY_PUBLIC_URL:-http://${LATCHKEY_HTTP_ADDR:-127.0.0.1:8102}}
export LATCHKEY_AUTH_DATABASE_URL=$pg/${prefix}_auth
export LATCHKEY_TEAMS_DATABASE_URL=$pg/${prefix}_teams
export LATCHKEY_CONTACTS_DATABASE_URL=$pg/${prefix}_contacts
export LATCHKEY_WEBHOOKS_DATABASE_URL=$pg/${prefix}_webhooks
export LATCHKEY_AUTH_ADDR=127.0.0.1:50051 LATCHKEY_TEAMS_ADDR=127.0.0.1:50052
export LATCHKEY_CONTACTS_ADDR=127.0.0.1:50053 LATCHKEY_WEBHOOKS_ADDR=127.0.0.1:50054

"$bin" migrate
pids=()
trap 'kill -TERM "${pids[@]}" 2>/dev/null; wait' EXIT INT TERM
# Each service listens on its own default gRPC and metrics ports (50051–50054, 9464–9467), here
# on loopback only.
LATCHKEY_GRPC_ADDR=$LATCHKEY_AUTH_ADDR LATCHKEY_METRICS_ADDR=127.0.0.1:9464 "$bin" serve auth & pids+=($!)
LATCHKEY_GRPC_ADDR=$LATCHKEY_TEAMS_ADDR LATCHKEY_METRICS_ADDR=127.0.0.1:9465 "$bin" serve teams & pids+=($!)
LATCHKEY_GRPC_ADDR=$LATCHKEY_CONTACTS_ADDR LATCHKEY_METRICS_ADDR=127.0.0.1:9466 "$bin" serve contacts & pids+=($!)
LATCHKEY_GRPC_ADDR=$LATCHKEY_WEBHOOKS_ADDR LATCHKEY_METRICS_ADDR=127.0.0.1:9467 "$bin" serve webhooks & pids+=($!)
"$bin" serve gateway & pids+=($!)

for _ in $(seq 1 60); do
  curl -sf "http://${LATCHKEY_HTTP_ADDR:-127.0.0.1:8102}/health/ready" >/dev/null && break
  sleep 0.5
done
curl -sf "http://${LATCHKEY_HTTP_ADDR:-127.0.0.1:8102}/health/ready" >/dev/null || { echo "stack did not become ready" >&2; exit 1; }
echo "Distributed stack ready on http://${LATCHKEY_HTTP_ADDR:-127.0.0.1:8102}/api/v1/"
"$bin" projects list | grep -q . || "$bin" projects create --display-name "Default project"
"$bin" projects list
wait
