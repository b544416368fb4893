"""The lock is the only source of versions, and every install uses it (issue 19). No services needed."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s;\\]+)")


def locked(name: str) -> dict[str, str]:
    """{canonical name: version} of requirements/NAME.txt; every pin carries hashes."""
    pins: dict[str, str] = {}
    text = (REPO / "requirements" / f"{name}.txt").read_text()
    for block in re.split(r"\n(?=\S)", text):
        first = block.splitlines()[0]
        if first.startswith("#") or not first.strip():
            continue
        match = PIN.match(first)
        assert match, f"{name}.txt: not an exact pin: {first}"
        assert "--hash=sha256:" in block, f"{name}.txt: {first} has no hash"
        pins[canonicalize_name(match.group(1))] = match.group(3)
    return pins


def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def test_dev_lock_has_the_runtime_versions_of_the_prod_lock():
    prod, dev = locked("prod"), locked("dev")
    assert {name: dev.get(name) for name in prod} == prod


def test_locks_satisfy_pyproject():
    """A dependency edited in pyproject.toml without `bash scripts/lock.sh` fails here."""
    project = pyproject()
    wanted = {
        "prod": project["project"]["dependencies"] + project["build-system"]["requires"],
        "dev": project["project"]["dependencies"] + project["project"]["optional-dependencies"]["dev"],
    }
    for lock, requirements in wanted.items():
        pins = locked(lock)
        for text in requirements:
            requirement = Requirement(text)
            name = canonicalize_name(requirement.name)
            assert name in pins, f"{requirement.name} is not in requirements/{lock}.txt: run bash scripts/lock.sh"
            assert requirement.specifier.contains(pins[name], prereleases=True), (
                f"requirements/{lock}.txt has {name}=={pins[name]}, pyproject asks {text}: run bash scripts/lock.sh"
            )


def test_worker_transport_dependencies_are_in_the_runtime_lock():
    # kombu's Redis transport imports `packaging`: it comes with celery's redis extra (the bug of issue 19).
    prod = locked("prod")
    assert {"redis", "packaging", "kombu", "celery"} <= prod.keys()
    assert any(Requirement(r).name == "celery" and "redis" in Requirement(r).extras
               for r in pyproject()["project"]["dependencies"])


def test_every_install_reads_the_lock_and_ignores_no_failure():
    dockerfile = (REPO / "deploy" / "Dockerfile").read_text()
    assert "pip install --require-hashes -r /tmp/requirements-prod.txt" in dockerfile
    assert "COPY requirements/prod.txt" in dockerfile
    assert "pip install --no-deps --no-build-isolation /src" in dockerfile
    assert "|| true" not in dockerfile
    setup = (REPO / "scripts" / "setup.sh").read_text()
    assert "--require-hashes -r requirements/dev.txt" in setup and "--no-deps --no-build-isolation -e ." in setup
    services = (REPO / "deploy" / "install-services.sh").read_text()
    assert "--require-hashes -r \"$DEST/requirements/prod.txt\"" in services


def test_production_md_lists_the_commands_compose_and_the_test_run():
    doc = (REPO / "deploy" / "PRODUCTION.md").read_text()
    services = yaml.safe_load((REPO / "deploy" / "compose.yaml").read_text())["services"]
    for name in ("migrate", "web", "worker", "jobs-worker", "beat"):
        command = " ".join(services[name]["command"])
        assert f"    {command}\n" in doc, f"deploy/PRODUCTION.md does not list the {name} command: {command}"
    for unit in ("web", "worker", "jobs-worker"):
        text = (REPO / "deploy" / "systemd" / f"loreweave-{unit}.service").read_text()
        assert "/opt/loreweave/.venv/bin/" + " ".join(services[unit]["command"]) in text
