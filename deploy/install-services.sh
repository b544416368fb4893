#!/usr/bin/env bash
# Install Loreweave as systemd services on a Debian 12 host (run as root from a checkout).
#   bash deploy/install-services.sh            # /opt/loreweave, user loreweave
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 1; }
SRC="$(cd "$(dirname "$0")/.." && pwd)"
DEST=/opt/loreweave

apt-get install -y -qq --no-install-recommends postgresql redis-server python3-venv gettext nginx >/dev/null
bash "$SRC/deploy/install-pgvector.sh"

id loreweave >/dev/null 2>&1 || useradd --system --home /var/lib/loreweave --shell /usr/sbin/nologin loreweave
install -d -o loreweave -g loreweave /var/lib/loreweave
install -d /etc/loreweave
[ -f /etc/loreweave/loreweave.env ] || install -m 600 "$SRC/deploy/loreweave.env.example" /etc/loreweave/loreweave.env

rsync -a --delete --exclude .venv --exclude var --exclude .git "$SRC/" "$DEST/"
[ -x "$DEST/.venv/bin/python" ] || python3.11 -m venv "$DEST/.venv"
# The locked runtime tree (hash-checked), then the package itself: as deploy/Dockerfile does.
"$DEST/.venv/bin/pip" install -q --require-hashes -r "$DEST/requirements/prod.txt"
bash "$DEST/scripts/compile-messages.sh" --force "$DEST"  # the Spanish pages' catalogue, as the image does
"$DEST/.venv/bin/pip" install -q --no-deps --no-build-isolation "$DEST"
"$DEST/.venv/bin/pip" check

set -a; . /etc/loreweave/loreweave.env; set +a
(cd "$DEST" && .venv/bin/python manage.py migrate --noinput && .venv/bin/python manage.py collectstatic --noinput -v0)

install -m 644 "$SRC"/deploy/systemd/*.service /etc/systemd/system/
systemctl daemon-reload
systemctl enable --now loreweave-web loreweave-worker loreweave-jobs-worker loreweave-beat

# nginx (Debian's package) in front of gunicorn on port 80: it buffers whole requests, so slow clients
# never hold a gunicorn worker (issue 26.6). Debian's default site also claims port 80: it goes.
install -m 644 "$SRC/deploy/nginx/loreweave-proxy.conf" /etc/nginx/snippets/loreweave-proxy.conf
install -m 644 "$SRC/deploy/nginx/loreweave.conf" /etc/nginx/sites-available/loreweave.conf
ln -sfn /etc/nginx/sites-available/loreweave.conf /etc/nginx/sites-enabled/loreweave.conf
rm -f /etc/nginx/sites-enabled/default
nginx -t -q
systemctl enable nginx
systemctl reload-or-restart nginx
echo "Loreweave installed behind nginx (port 80). Edit /etc/loreweave/loreweave.env, then: systemctl restart loreweave-web loreweave-worker loreweave-jobs-worker"
