#!/usr/bin/env bash
# Install everything and run the whole suite twice: on the embedded default
# (SQLite, eager Celery, in-process vectors) and on the real stack
# (PostgreSQL + pgvector, Redis broker, a real Celery worker).
#
# With CI=true or REQUIRE_SERVICES=1 a missing service fails the run.
set -uo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh || exit 1

export PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1
status=0

echo "=== pass 1/2: SQLite (embedded default) ==="
env -u DATABASE_URL -u CELERY_BROKER_URL \
  .venv/bin/python -m pytest -m "not postgres and not services" "$@" || status=$?

echo "=== pass 2/2: PostgreSQL + pgvector, Redis broker ==="
if bash scripts/services.sh; then
  DATABASE_URL="${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/loreweave}" \
  CELERY_BROKER_URL="${TEST_BROKER_URL:-redis://127.0.0.1:6379/15}" \
  REQUIRE_SERVICES=1 \
    .venv/bin/python -m pytest -m "not contract" "$@" || status=$?  # contract tests run their own server: pass 1 only
elif [ "${CI:-}" = true ] || [ "${REQUIRE_SERVICES:-}" = 1 ]; then
  echo "test: the real service stack is required here and is missing" >&2
  status=1
else
  echo "test: PostgreSQL/Redis not available: skipped the second pass (set REQUIRE_SERVICES=1 to fail instead)"
fi
exit $status
