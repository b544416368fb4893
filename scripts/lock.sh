#!/usr/bin/env bash
# Refresh the locked dependency trees from pyproject.toml (uv pip compile --generate-hashes):
#   requirements/prod.txt  runtime dependencies + the build backend (what production installs)
#   requirements/dev.txt   the same runtime versions + the dev extra (what setup.sh installs)
# Every transitive package is pinned with the hashes of its PyPI files (universal: environment
# markers say where a package applies; Python 3.11 only, as pyproject.toml requires).
#
#   bash scripts/lock.sh                       # keep locked versions that still fit pyproject.toml
#   bash scripts/lock.sh --upgrade             # newest versions pyproject.toml allows
#   bash scripts/lock.sh --upgrade-package X   # move one package only
#
# Needs PyPI. uv itself is pinned here and installed in var/lock-tools (not in .venv).
set -euo pipefail
cd "$(dirname "$0")/.."

UV_VERSION=0.13.9
tools=var/lock-tools
if [ ! -x "$tools/bin/uv" ] || [ "$("$tools/bin/uv" --version | cut -d' ' -f2)" != "$UV_VERSION" ]; then
  python3.11 -m venv "$tools"
  "$tools/bin/python" -m pip install -q "uv==$UV_VERSION"
fi

# The build backend pyproject.toml asks for ([build-system] requires) is locked too: installs
# build the package with --no-build-isolation from these pins.
build_in="$tools/build-system.in"
python3.11 -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"]))' > "$build_in"

compile() {
  # Paths in the header are relative, and the header names this script, so the files diff cleanly.
  UV_CUSTOM_COMPILE_COMMAND="bash scripts/lock.sh" "$tools/bin/uv" pip compile --quiet \
    --generate-hashes --universal --python-version 3.11 \
    --index-url https://pypi.org/simple --no-strip-extras "$@"
}

compile pyproject.toml "$build_in" -o requirements/prod.txt "${@}"
# dev.txt: the runtime versions of prod.txt exactly (a constraint), plus the dev extra.
compile pyproject.toml "$build_in" --extra dev -c requirements/prod.txt -o requirements/dev.txt "${@}"
echo "lock: wrote requirements/prod.txt and requirements/dev.txt"
