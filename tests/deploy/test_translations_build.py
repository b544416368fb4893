"""The production image compiles the pages' translations (the .mo files are not in git): otherwise
the Spanish pages show English in production. No container engine runs here, so these run the
image's own steps on a clean copy of the source: the compile script, then the wheel the image's
`pip install /src` builds; test_production_install.py serves a Spanish page from such an install."""
from __future__ import annotations

import gettext
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from web.catalogues import catalogue_problems

REPO = Path(__file__).resolve().parents[2]
SCRIPT = "scripts/compile-messages.sh"
CATALOGUE = Path("web/locale/es/LC_MESSAGES")


def clean_checkout(root: Path) -> Path:
    """What the image's build context holds for the package: git's files, so no compiled .mo."""
    source = root / "src"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "var", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", ".hypothesis",
        "tests", "*.mo"))
    return source


def compile_messages(source: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(REPO / SCRIPT), *args, str(source)], capture_output=True, text=True,
                          timeout=60, check=False)


def run_lines(dockerfile: str) -> list[str]:
    """The Dockerfile's RUN steps, continuation lines joined."""
    joined = re.sub(r"\\\n\s*", " ", dockerfile)
    return [line[4:] for line in joined.splitlines() if line.startswith("RUN ")]


def test_the_image_installs_gettext_and_compiles_with_the_setup_script_before_building_the_package():
    dockerfile = (REPO / "deploy" / "Dockerfile").read_text()
    runs = run_lines(dockerfile)
    gettext_at = next(i for i, r in enumerate(runs) if "apt-get install" in r and "gettext" in r)
    build_at = next(i for i, r in enumerate(runs) if "pip install --no-deps --no-build-isolation /src" in r)
    build = runs[build_at]
    assert gettext_at < build_at
    assert build.index(f"bash /src/{SCRIPT} --force /src") < build.index("pip install --no-deps")
    assert f"COPY {SCRIPT} /src/{SCRIPT}" in dockerfile
    assert any("python -m web.catalogues" in r for r in runs[build_at + 1:])  # checked installed
    # One command everywhere: setup.sh and the systemd install run the same script.
    assert f"bash {SCRIPT}" in (REPO / "scripts" / "setup.sh").read_text()
    services = (REPO / "deploy" / "install-services.sh").read_text()
    assert f'bash "$DEST/{SCRIPT}" --force "$DEST"' in services and "gettext" in services


def test_the_script_compiles_the_catalogue_the_pages_read_and_refuses_a_broken_one(tmp_path):
    source = clean_checkout(tmp_path)
    locale = source / "web" / "locale"
    assert any("es:" in p and "missing" in p for p in catalogue_problems(locale))  # the bug: English pages
    done = compile_messages(source, "--force")
    assert done.returncode == 0, done.stderr
    assert catalogue_problems(locale) == []
    with (source / CATALOGUE / "django.mo").open("rb") as handle:
        spanish = gettext.GNUTranslations(handle)
    assert spanish.gettext("Sign in") == "Iniciar sesión" and spanish.gettext("AI updates") == "Actualizaciones de la IA"
    # A message added after the compile is caught as stale (the check the image runs).
    po = source / CATALOGUE / "django.po"
    po.write_text(po.read_text(encoding="utf-8") + '\nmsgid "Brand new"\nmsgstr "Nuevo del todo"\n', encoding="utf-8")
    assert any("lacks 1" in p for p in catalogue_problems(locale))
    # msgfmt --check refuses a translation that breaks its placeholders: the build stops.
    po.write_text(po.read_text(encoding="utf-8") + '\n#, python-format\nmsgid "%(n)s left"\nmsgstr "quedan"\n',
                  encoding="utf-8")
    broken = compile_messages(source, "--force")
    assert broken.returncode != 0 and "format" in broken.stderr


def test_the_package_built_after_the_compile_carries_the_spanish_catalogue(tmp_path):
    source = clean_checkout(tmp_path)
    assert compile_messages(source, "--force").returncode == 0
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                            "-w", str(tmp_path / "dist"), str(source)], capture_output=True, text=True, timeout=300,
                           check=False)
    assert built.returncode == 0, built.stderr[-3000:]
    wheel = next((tmp_path / "dist").glob("loreweave-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        assert str(CATALOGUE / "django.mo") in names and str(CATALOGUE / "django.po") in names
        spanish = gettext.GNUTranslations(archive.open(str(CATALOGUE / "django.mo")))
    assert spanish.gettext("Sign in") == "Iniciar sesión"
