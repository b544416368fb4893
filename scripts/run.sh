#!/usr/bin/env bash
# Install everything and run Loreweave on its embedded default: a SQLite file in ./var,
# in-process vector search, and Celery workers (indexing, AI jobs) beside the web server on kombu's filesystem
# transport (queue files under ./var/broker: no broker service), so imports answer at once and
# the editor shows indexing progress (W-7). Prints the URL and a demo API key.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
export OMP_NUM_THREADS=1
export CELERY_BROKER_URL="${CELERY_BROKER_URL:-filesystem://}"
.venv/bin/python manage.py migrate --noinput -v0
.venv/bin/python manage.py demo_setup
HOST="${HOST:-127.0.0.1}" PORT="${PORT:-8000}"

# Two workers, one per queue (config/settings.py): indexing, usage counts and translations never wait
# behind an AI job's minutes of model calls. The first also runs beat (-B): the periodic sweeps that
# index entries a lost task left pending and take over AI jobs whose worker died.
DATA_DIR="${LOREWEAVE_DATA_DIR:-var}"
.venv/bin/celery -A config worker --pool=solo --concurrency=1 -Q loreweave -n indexing@%h \
  -B --schedule "$DATA_DIR/celerybeat-schedule" --loglevel=WARNING &
worker=$!
.venv/bin/celery -A config worker --pool=solo --concurrency=1 -Q loreweave.jobs -n jobs@%h --loglevel=WARNING &
jobs_worker=$!
trap 'kill "$worker" "$jobs_worker" 2>/dev/null; wait "$worker" "$jobs_worker" 2>/dev/null' EXIT INT TERM
echo "Loreweave is running at http://$HOST:$PORT/  (library: /library, API docs: /api/docs/, health: /healthz). Ctrl-C stops it."
.venv/bin/gunicorn config.wsgi:application --config deploy/gunicorn.conf.py --bind "$HOST:$PORT"
