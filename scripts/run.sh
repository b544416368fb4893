#!/usr/bin/env bash
# Install everything and run Loreweave on its embedded default: a SQLite file in ./var,
# in-process vector search, and Celery workers (indexing, AI jobs) beside the web server on kombu's filesystem
# transport (queue files under ./var/broker: no broker service), so imports answer at once and
# the editor shows indexing progress (W-7). Clients reach nginx (deploy/nginx: it reads each request
# whole before gunicorn sees it, so slow clients cannot hold gunicorn's workers; issue 26.6), which
# proxies to gunicorn on an internal loopback port. Prints the URL and a demo API key.
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
stop=("$worker" "$jobs_worker")
trap 'kill "${stop[@]}" 2>/dev/null; wait "${stop[@]}" 2>/dev/null' EXIT INT TERM

# The web side: nginx on the public address in front of gunicorn on a free loopback port. Its config
# is written under var/nginx (pid, temp files and logs there too: no root paths), around the server
# part production uses (deploy/nginx/loreweave-proxy.conf). Without nginx, gunicorn serves clients
# directly with keep-alive threads, and says so.
# NGINX names the binary; set it empty (`NGINX= make run`) to serve with gunicorn alone.
NGINX="${NGINX-$(command -v nginx || { [ -x /usr/sbin/nginx ] && echo /usr/sbin/nginx; } || true)}"
if [ -n "$NGINX" ]; then
  WEB_PORT="${WEB_PORT:-$(.venv/bin/python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}"
  conf="$(bash deploy/nginx/local-conf.sh var/nginx "$HOST:$PORT" "127.0.0.1:$WEB_PORT")"
  "$NGINX" -p "$PWD/var/nginx" -c "$conf" -e "$PWD/var/nginx/logs/error.log" &
  proxy=$!
  stop+=("$proxy")
  sleep 0.5
  kill -0 "$proxy" 2>/dev/null || { echo "run: nginx did not start on $HOST:$PORT (see var/nginx/logs/error.log)" >&2; exit 1; }
  # The sign-in and sign-up limits count per client address: read it from nginx's X-Forwarded-For.
  export CLIENT_ADDRESS_PROXIES=1
  bind="127.0.0.1:$WEB_PORT"
else
  echo "run: WARNING: no nginx (scripts/setup.sh installs it when run as root): gunicorn serves" \
       "clients directly, and slow clients can tie up its threads" >&2
  export GUNICORN_WORKER_CLASS="${GUNICORN_WORKER_CLASS:-gthread}"
  bind="$HOST:$PORT"
fi
echo "Loreweave is running at http://$HOST:$PORT/  (library: /library, API docs: /api/docs/, health: /healthz). Ctrl-C stops it."
.venv/bin/gunicorn config.wsgi:application --config deploy/gunicorn.conf.py --bind "$bind"
