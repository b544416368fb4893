#!/usr/bin/env bash
# Install Loreweave into ./.venv (Python 3.11). Safe to run again: it only
# installs what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

find_python() {
  for candidate in "${PYTHON:-}" python3.11 "$HOME/.pyenv/versions/3.11.7/bin/python3.11" /usr/bin/python3.11 python3; do
    [ -n "$candidate" ] || continue
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; raise SystemExit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
      command -v "$candidate"; return 0
    fi
  done
  return 1
}

if [ ! -x .venv/bin/python ]; then
  PY="$(find_python)" || { echo "setup: Python 3.11 is required (set PYTHON=/path/to/python3.11)" >&2; exit 1; }
  echo "setup: creating .venv with $PY"
  "$PY" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
fi

# Install the locked dev tree (requirements/dev.txt: every package pinned, hash-checked; refresh
# with scripts/lock.sh), then the project itself, editable, without resolving anything more.
# Only when the lock (or the package's metadata) changed since the last install.
stamp=.venv/.loreweave-installed
want="$(cat requirements/dev.txt pyproject.toml | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: installing requirements/dev.txt"
  .venv/bin/python -m pip install -q --require-hashes -r requirements/dev.txt
  .venv/bin/python -m pip install -q --no-deps --no-build-isolation -e .
  .venv/bin/python -m pip check
  echo "$want" > "$stamp"
fi

# --- the web pages (issue 15) ------------------------------------------------------------
# System packages, installed as root when missing (idempotent): gettext compiles the Spanish
# catalogue; Debian's Chromium and npm serve the browser tests (Playwright never downloads a browser).
need=()
command -v msgfmt >/dev/null 2>&1 || need+=(gettext)
[ -x /usr/bin/chromium ] || need+=(chromium)
command -v npm >/dev/null 2>&1 || need+=(npm)
# nginx in front of gunicorn for `make run` (issue 26.6: slow clients hold the proxy, not a worker).
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need+=(nginx)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: apt-get install ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
  else
    echo "setup: missing ${need[*]} (run as root to install them); pages stay English, browser tests fail," \
         "make run serves without its proxy" >&2
  fi
fi
if command -v msgfmt >/dev/null 2>&1; then
  bash scripts/compile-messages.sh  # the image and install-services.sh run the same command
fi
# axe-core for the accessibility checks, from its npm package at a pinned version (into var/,
# which git ignores); the browser tests inject it into each page.
AXE_VERSION=4.11.0
axe_dir=var/node
if command -v npm >/dev/null 2>&1 &&
   [ "$(cat "$axe_dir/node_modules/axe-core/package.json" 2>/dev/null | grep -o '"version": *"[^"]*"' | head -1 | grep -o '[0-9][^"]*')" != "$AXE_VERSION" ]; then
  echo "setup: npm install axe-core@$AXE_VERSION"
  mkdir -p "$axe_dir"
  npm install --silent --no-audit --no-fund --prefix "$axe_dir" "axe-core@$AXE_VERSION" >/dev/null
fi
