"""Build the SillyTavern extension zip a user installs: one folder, `loreweave/`, holding
clients/sillytavern. Unzip it into SillyTavern's `data/<user>/extensions/` (or
`public/scripts/extensions/third-party/`) and reload SillyTavern."""
from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "clients" / "sillytavern"
FILES = ("manifest.json", "index.js", "settings.html", "style.css")


def build(out: Path) -> Path:
    version = json.loads((SOURCE / "manifest.json").read_text())["version"]
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in FILES:
            # A fixed date: the same sources give the same zip, byte for byte.
            info = zipfile.ZipInfo(f"loreweave/{name}", date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            archive.writestr(info, (SOURCE / name).read_bytes(), zipfile.ZIP_DEFLATED)
    print(f"{out} (extension version {version})")
    return out


if __name__ == "__main__":
    build(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "var" / "dist" / "loreweave-sillytavern.zip")
