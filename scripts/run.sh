#!/usr/bin/env bash
# Install everything and run Loreweave on its embedded default: a SQLite file
# in ./var, Celery in eager mode, in-process vector search. Prints the URL and
# a demo API key.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
export OMP_NUM_THREADS=1
.venv/bin/python manage.py migrate --noinput -v0
.venv/bin/python manage.py demo_setup
HOST="${HOST:-127.0.0.1}" PORT="${PORT:-8000}"
echo "Loreweave is running at http://$HOST:$PORT/  (API docs: /api/docs/, health: /healthz). Ctrl-C stops it."
exec .venv/bin/gunicorn lore_platform.wsgi:application --config deploy/gunicorn.conf.py --bind "$HOST:$PORT"
