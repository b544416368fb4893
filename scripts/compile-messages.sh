#!/usr/bin/env bash
# Compile the pages' translations (.po → .mo) with GNU gettext's msgfmt, checked. The one command
# scripts/setup.sh, deploy/Dockerfile and deploy/install-services.sh run (the .mo files are not in
# git): without them the Spanish pages show English.
#   bash scripts/compile-messages.sh [--force] [ROOT]     # ROOT: a source tree (default: this repo)
# Without --force a catalogue whose .mo is newer than its .po is left as it is.
set -euo pipefail
force=0
if [ "${1:-}" = "--force" ]; then force=1; shift; fi
root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
command -v msgfmt >/dev/null 2>&1 || { echo "compile-messages: msgfmt missing (apt-get install gettext)" >&2; exit 1; }
shopt -s nullglob
catalogues=("$root"/web/locale/*/LC_MESSAGES/django.po)
[ ${#catalogues[@]} -gt 0 ] || { echo "compile-messages: no catalogue under $root" >&2; exit 1; }
for po in "${catalogues[@]}"; do
  mo="${po%.po}.mo"
  if [ "$force" = 1 ] || [ ! -f "$mo" ] || [ "$po" -nt "$mo" ]; then
    msgfmt --check -o "$mo" "$po"
  fi
done
