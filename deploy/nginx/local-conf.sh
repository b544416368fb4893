#!/usr/bin/env bash
# Write the nginx config `make run` (scripts/run.sh) and `python -m bench.faults slow` start nginx with:
#   bash deploy/nginx/local-conf.sh DIR LISTEN UPSTREAM     e.g. var/nginx 127.0.0.1:8000 127.0.0.1:8001
# Everything nginx writes (pid, temp files, logs) goes under DIR, so it runs without root and beside any
# system nginx. The server part is deploy/nginx/loreweave-proxy.conf, the same file production includes.
# Prints the config's path; run it with: nginx -p DIR -c DIR/nginx.conf (it stays in the foreground).
set -euo pipefail
[ $# = 3 ] || { echo "usage: $0 DIR LISTEN UPSTREAM" >&2; exit 2; }
dir="$(mkdir -p "$1" && cd "$1" && pwd)"
listen="$2" upstream="$3"
shared="$(cd "$(dirname "$0")" && pwd)/loreweave-proxy.conf"
mime=/etc/nginx/mime.types
mkdir -p "$dir/tmp" "$dir/logs"
{
  echo "# Written by deploy/nginx/local-conf.sh; rewritten at every start."
  echo "daemon off;"
  # Started by root (make run as root), nginx would run its workers as nobody, who may not enter the
  # checkout (a home folder) to write request bodies under DIR/tmp: run them as the user who started it,
  # as gunicorn and the Celery workers beside it run.
  [ "$(id -u)" = 0 ] && echo "user root;"
  echo "worker_processes 1;"
  echo "pid $dir/nginx.pid;"
  echo "error_log $dir/logs/error.log warn;"
  echo "events { worker_connections 1024; }"
  echo "http {"
  [ -f "$mime" ] && echo "    include $mime;"
  echo "    default_type application/octet-stream;"
  echo "    access_log $dir/logs/access.log;"
  for temp in client_body proxy fastcgi uwsgi scgi; do
    echo "    ${temp}_temp_path $dir/tmp/$temp;"
  done
  echo "    upstream loreweave_web { server $upstream; }"
  echo "    server {"
  echo "        listen $listen;"
  echo "        include $shared;"
  echo "    }"
  echo "}"
} > "$dir/nginx.conf"
echo "$dir/nginx.conf"
