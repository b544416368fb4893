#!/usr/bin/env bash
# Build and install the pgvector extension for the local PostgreSQL (Debian 12).
#
# Debian 12 ships no pgvector package, so we build it from Debian trixie's
# *source* package (patched, reviewed upstream code) against our PostgreSQL
# major version. Idempotent: a second run only checks and exits.
#
#   sudo bash deploy/install-pgvector.sh          # install if missing
#   FORCE=1 sudo bash deploy/install-pgvector.sh  # rebuild
#   PG_MAJOR=15 ...                               # default: the installed major
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

[ "$(id -u)" = 0 ] || { echo "install-pgvector: run as root" >&2; exit 1; }

PG_MAJOR="${PG_MAJOR:-$(ls /usr/lib/postgresql 2>/dev/null | sort -n | tail -1)}"
PG_MAJOR="${PG_MAJOR:-15}"
PG_CONFIG="/usr/lib/postgresql/${PG_MAJOR}/bin/pg_config"
BUILD_ROOT="${BUILD_ROOT:-/usr/local/src/pgvector-build}"
SRC_LIST=/etc/apt/sources.list.d/loreweave-trixie-src.sources

installed() {
  [ -x "$PG_CONFIG" ] || return 1
  [ -f "$("$PG_CONFIG" --sharedir)/extension/vector.control" ] &&
    [ -f "$("$PG_CONFIG" --pkglibdir)/vector.so" ]
}

if installed && [ "${FORCE:-0}" != 1 ]; then
  echo "install-pgvector: already installed for PostgreSQL $PG_MAJOR"
  exit 0
fi

cleanup() { rm -f "$SRC_LIST"; }
trap cleanup EXIT

# Only a deb-src line: no trixie binaries can be installed by accident.
cat > "$SRC_LIST" <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC

echo "install-pgvector: apt-get update"
apt-get update -qq
echo "install-pgvector: build dependencies"
apt-get install -y -qq --no-install-recommends \
  "postgresql-server-dev-${PG_MAJOR}" build-essential dpkg-dev >/dev/null

rm -rf "$BUILD_ROOT"; mkdir -p "$BUILD_ROOT"; cd "$BUILD_ROOT"
echo "install-pgvector: apt-get source pgvector"
apt-get source -qq pgvector 2>&1 | grep -v unsandboxed || true
SRC_DIR="$(find "$BUILD_ROOT" -maxdepth 1 -mindepth 1 -type d -name 'pgvector-*' | head -1)"
[ -n "$SRC_DIR" ] || { echo "install-pgvector: no source directory" >&2; exit 1; }

cd "$SRC_DIR"
# OPTFLAGS="" keeps the library portable (no -march=native); no JIT bitcode.
make -s -j"$(nproc)" PG_CONFIG="$PG_CONFIG" OPTFLAGS="" with_llvm=no
make -s install PG_CONFIG="$PG_CONFIG" with_llvm=no
installed || { echo "install-pgvector: build finished but extension files are missing" >&2; exit 1; }
echo "install-pgvector: installed for PostgreSQL $PG_MAJOR"
