from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PRODUCTION_ENV = {
    "DEBUG": "false",
    "SECRET_KEY": "prod-" + "k" * 60,
    "ALLOWED_HOSTS": "lore.example.com",
}


def _manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k not in {"DEBUG", "SECRET_KEY", "ALLOWED_HOSTS"}}
    full_env.update(env)
    full_env.pop("DJANGO_SETTINGS_MODULE", None)
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=REPO, env=full_env, capture_output=True, text=True, timeout=120
    )


def test_check_deploy_is_clean_with_production_variables(tmp_path):
    result = _manage("check", "--deploy", "--fail-level", "WARNING", env={**PRODUCTION_ENV, "LOREWEAVE_DATA_DIR": str(tmp_path)})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_production_without_secret_key_refuses_to_start(tmp_path):
    env = {**PRODUCTION_ENV, "SECRET_KEY": "", "LOREWEAVE_DATA_DIR": str(tmp_path)}
    result = _manage("check", env=env)
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr


def test_production_without_allowed_hosts_refuses_to_start(tmp_path):
    env = {**PRODUCTION_ENV, "ALLOWED_HOSTS": "", "LOREWEAVE_DATA_DIR": str(tmp_path)}
    result = _manage("check", env=env)
    assert result.returncode != 0
    assert "ALLOWED_HOSTS" in result.stderr


def test_no_top_level_package_shadows_the_standard_library():
    packages = {p.name for p in REPO.iterdir() if (p / "__init__.py").exists()}
    assert packages, "expected top-level packages"
    assert not packages & set(sys.stdlib_module_names)


def test_embedded_default_uses_sqlite_and_eager_celery(tmp_path):
    env = {"LOREWEAVE_DATA_DIR": str(tmp_path), "DATABASE_URL": "", "CELERY_BROKER_URL": ""}
    code = (
        "import django, os; os.environ['DJANGO_SETTINGS_MODULE']='config.settings'; django.setup();"
        "from django.conf import settings as s;"
        "print(s.DATABASES['default']['ENGINE'], s.CELERY_TASK_ALWAYS_EAGER, s.VECTOR_BACKEND)"
    )
    full_env = {**os.environ, **env}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=full_env, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["django.db.backends.sqlite3", "True", "memory"], out.stderr
