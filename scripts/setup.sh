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
