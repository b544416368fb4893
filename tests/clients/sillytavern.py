"""SillyTavern 1.18.0 from ../shared/peers, run for a test: copied to a temporary folder (never run in
place), configured (a port, localhost only, no auth, no browser launch, no downloads), our extension
copied into its third-party extensions folder, `node server.js`.

`npm ci --omit=dev` runs once per package-lock: its node_modules are kept under
var/sillytavern/node_modules-<hash> and linked into each copy; the web bundle SillyTavern compiles
on its first start is kept under var/sillytavern/webpack-<hash> (the first start is ~25 s, later
ones ~5 s).
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PEER = REPO.parent / "shared" / "peers" / "sillytavern-1.18.0"
if not PEER.exists():  # a worktree under /work/wt reaches the shared folder one level up
    PEER = Path("/work/shared/peers/sillytavern-1.18.0")
EXTENSION = REPO / "clients" / "sillytavern"
CACHE = REPO / "var" / "sillytavern"
EXTENSION_FOLDER = "loreweave"


@dataclass(frozen=True)
class SillyTavern:
    url: str
    root: Path
    log: Path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def configure(default_config: str, port: int) -> str:
    """The peers README's settings, changed line by line so the rest of the file stays SillyTavern's."""
    text = re.sub(r"(?m)^port: \d+", f"port: {port}", default_config)
    text = re.sub(r"(?m)^listen: \w+", "listen: false", text)
    text = re.sub(r"(?m)^whitelistMode: \w+", "whitelistMode: true", text)
    text = re.sub(r"(?m)^basicAuthMode: \w+", "basicAuthMode: false", text)
    text = re.sub(r"(?m)^enableUserAccounts: \w+", "enableUserAccounts: false", text)
    text = re.sub(r"(?m)^enableDownloadableTokenizers: \w+", "enableDownloadableTokenizers: false", text)
    text = re.sub(r"(?m)^(browserLaunch:\n(?:  #.*\n)*  enabled: )\w+", r"\1false", text)
    text = re.sub(r"(?m)^(extensions:\n(?:  .*\n)*?  autoUpdate: )\w+", r"\1false", text)
    assert f"port: {port}" in text and "enableDownloadableTokenizers: false" in text
    return text


def _lock_hash() -> str:
    return hashlib.sha256((PEER / "package-lock.json").read_bytes()).hexdigest()[:16]


def node_modules() -> Path:
    """SillyTavern's production node_modules for its package-lock, installed once (npm registry only)."""
    target = CACHE / f"node_modules-{_lock_hash()}"
    if (target / "node_modules" / ".package-lock.json").exists():
        return target / "node_modules"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copy2(PEER / name, target / name)
    subprocess.run(["npm", "ci", "--omit=dev", "--no-audit", "--no-fund"], cwd=target,
                   check=True, capture_output=True, timeout=600)
    return target / "node_modules"


def install_extension(root: Path, workdir: Path) -> Path:
    """As a user installs it by hand: `make sillytavern-extension`'s zip unpacked into
    public/scripts/extensions/third-party/ (its one folder, loreweave/)."""
    archive = subprocess.run([sys.executable, str(REPO / "scripts" / "build-sillytavern-extension.py"),
                              str(workdir / "loreweave-sillytavern.zip")], check=True, capture_output=True, text=True)
    assert archive.returncode == 0
    third_party = root / "public" / "scripts" / "extensions" / "third-party"
    with zipfile.ZipFile(workdir / "loreweave-sillytavern.zip") as zipped:
        zipped.extractall(third_party)
    return third_party / EXTENSION_FOLDER


@contextmanager
def sillytavern(workdir: Path) -> Iterator[SillyTavern]:
    root = workdir / "sillytavern"
    shutil.copytree(PEER, root, ignore=shutil.ignore_patterns("node_modules", ".git"))
    (root / "node_modules").symlink_to(node_modules(), target_is_directory=True)
    port = _free_port()
    (root / "config.yaml").write_text(configure((PEER / "default" / "config.yaml").read_text(), port))
    install_extension(root, workdir)
    # SillyTavern keeps its compiled bundle in dist/_webpack inside a container, else data/_webpack.
    webpack_cache = CACHE / f"webpack-{_lock_hash()}"
    bundles = ("dist/_webpack", "data/_webpack")
    for relative in bundles:
        if (webpack_cache / relative).exists():
            shutil.copytree(webpack_cache / relative, root / relative, dirs_exist_ok=True)
    log = workdir / "sillytavern.log"
    env = dict(os.environ, NODE_ENV="production")
    with open(log, "wb") as out:
        proc = subprocess.Popen(["node", "server.js"], cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"SillyTavern did not start:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.5)
        if not webpack_cache.exists():
            for relative in bundles:
                if (root / relative).exists():
                    shutil.copytree(root / relative, webpack_cache / relative)
        yield SillyTavern(url=url, root=root, log=log)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
