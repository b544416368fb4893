#!/usr/bin/env bash
# Make sure PostgreSQL (with pgvector) and Redis answer on 127.0.0.1.
# Starts them if they are installed but stopped; installs pgvector if missing.
# Exits non-zero, naming what is missing, when a service cannot be had.
set -euo pipefail
cd "$(dirname "$0")/.."

PGHOST=127.0.0.1 PGPORT=${PGPORT:-5432}
REDIS_PORT=${REDIS_PORT:-6379}

pg_up() { pg_isready -q -h "$PGHOST" -p "$PGPORT" 2>/dev/null; }
redis_up() { (exec 3<>"/dev/tcp/127.0.0.1/$REDIS_PORT" && printf 'PING\r\n' >&3 && head -c 5 <&3 | grep -q PONG) 2>/dev/null; }

if ! pg_up && command -v pg_ctlcluster >/dev/null 2>&1; then
  echo "services: starting PostgreSQL"
  for version in $(ls /etc/postgresql 2>/dev/null); do
    pg_ctlcluster --skip-systemctl-redirect "$version" main start 2>/dev/null || true
  done
  for _ in $(seq 1 20); do pg_up && break; sleep 0.5; done
fi
pg_up || { echo "services: PostgreSQL is not answering on $PGHOST:$PGPORT" >&2; exit 1; }

if [ "$(id -u)" = 0 ]; then
  bash deploy/install-pgvector.sh
fi
if ! psql -h "$PGHOST" -p "$PGPORT" -U postgres -d postgres -tAc \
     "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'" | grep -q 1; then
  echo "services: the pgvector extension is not available (run deploy/install-pgvector.sh as root)" >&2
  exit 1
fi

if ! redis_up && command -v redis-server >/dev/null 2>&1; then
  echo "services: starting Redis"
  mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
  redis-server --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/loreweave.log
  for _ in $(seq 1 20); do redis_up && break; sleep 0.25; done
fi
redis_up || { echo "services: Redis is not answering on 127.0.0.1:$REDIS_PORT" >&2; exit 1; }
echo "services: PostgreSQL (pgvector) and Redis are up"
