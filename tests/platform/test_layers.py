"""The apps import one way (README: "Layers"), and the engine imports no Django."""
from __future__ import annotations

import configparser
import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path

import retrieval
import retrieval.engine

REPO_ROOT = Path(__file__).resolve().parents[2]
CONTRACT = REPO_ROOT / ".importlinter"


def _layers() -> list[str]:
    parser = configparser.ConfigParser()
    parser.read(CONTRACT)
    return [line.strip() for line in parser["importlinter:contract:layers"]["layers"].splitlines() if line.strip()]


def test_the_layers_contract_holds() -> None:
    lint = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    result = subprocess.run([lint, "--config", str(CONTRACT), "--no-cache"], cwd=REPO_ROOT, capture_output=True,
                            text=True, check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "1 kept, 0 broken" in result.stdout


def test_the_contract_has_no_ignore_list() -> None:
    parser = configparser.ConfigParser()
    parser.read(CONTRACT)
    assert "ignore_imports" not in parser["importlinter:contract:layers"]


def _listed() -> set[str]:
    return {name.strip() for layer in _layers() for name in layer.replace("|", ":").split(":")}


def test_every_product_folder_is_a_layer_of_its_own() -> None:
    # The contract names folders, not modules: each top folder of the product is one layer, so a
    # new folder (or a module dropped at retrieval's root) cannot escape the contract.
    top = {p.name for p in REPO_ROOT.iterdir() if (p / "__init__.py").is_file()} - {"tests", "bench"}
    listed = _listed()
    assert top - {"retrieval"} <= listed, f"not in the layers contract: {sorted(top - {'retrieval'} - listed)}"
    assert all("." not in name or name.startswith("retrieval.") for name in listed)
    beside_the_engine = {f"retrieval.{m.name}" for m in pkgutil.iter_modules(retrieval.__path__)}
    assert beside_the_engine == {"retrieval.adapter", "retrieval.engine"} <= listed


def test_every_engine_module_imports_with_django_unimportable() -> None:
    modules = sorted(
        m.name for m in pkgutil.walk_packages(retrieval.engine.__path__, prefix="retrieval.engine.")
    )
    assert "retrieval.engine.sillytavern.turn" in modules and "retrieval.engine.smart" in modules
    probe = (
        "import importlib, sys\n"
        "class NoDjango:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'django' or name.startswith('django.'):\n"
        "            raise ImportError('the engine must not import ' + name)\n"
        "sys.meta_path.insert(0, NoDjango())\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stderr[-3000:]
