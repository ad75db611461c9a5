"""A brand-new Django project that adds ``django_orders`` checks and migrates cleanly.

Marked ``fresh_project`` (``pytest -m fresh_project``): it runs ``startproject``, ``check`` and
``migrate`` in child processes with this interpreter, where scripts/test installed the package
(editable), and an SQLite file in a temporary directory. It does not touch the test database.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.readme_install import (
    apply_settings,
    read_steps,
    read_testing,
    write_testing_files,
)

README = Path(__file__).resolve().parents[2] / "README.md"
MIGRATIONS = Path(__file__).resolve().parents[2] / "django_orders" / "migrations"
pytestmark = pytest.mark.fresh_project

SETTINGS_TAIL = """
INSTALLED_APPS += ["django_orders"]
DEBUG = False
ALLOWED_HOSTS = ["shop.example.com"]
DJANGO_ORDERS = {
    "API_KEY": "sk_test_fresh_project_key",
    "BASE_URL": "https://api.example.com",
}
"""


def django(*args: str, cwd: Path, **extra_env: str) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "ORDERS_")) and k not in ("PYTHONPATH", "DATABASE_URL")
    }
    env["DJANGO_SETTINGS_MODULE"] = "fresh.settings"
    env.update(extra_env)
    return subprocess.run(
        [sys.executable, "-m", "django", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_fresh_project_checks_and_migrates(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    created = django("startproject", "fresh", str(project), cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    settings_file = project / "fresh" / "settings.py"
    settings_file.write_text(settings_file.read_text() + SETTINGS_TAIL)

    checked = django("check", cwd=project)
    assert checked.returncode == 0, checked.stderr
    assert "System check identified no issues (0 silenced)." in checked.stdout

    migrated = django("migrate", "--no-input", cwd=project)
    assert migrated.returncode == 0, migrated.stderr
    # Every migration the package ships, in order (the files are what the wheel carries).
    ours = [line.strip() for line in migrated.stdout.splitlines() if "django_orders." in line]
    shipped = sorted(path.stem for path in MIGRATIONS.glob("0*.py"))
    assert len(shipped) >= 12
    assert ours == [f"Applying django_orders.{name}... OK" for name in shipped]

    with sqlite3.connect(project / "db.sqlite3") as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
    assert {"django_orders_order", "django_orders_orderrequest"} <= tables

    # The package came from the installation, not from this checkout's working directory.
    where = subprocess.run(
        [sys.executable, "-c", "import django_orders; print(django_orders.__file__)"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert where.stdout.strip().endswith(os.path.join("django_orders", "__init__.py"))


def test_a_fresh_project_without_settings_reports_e001(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    assert django("startproject", "fresh", str(project), cwd=tmp_path).returncode == 0
    settings_file = project / "fresh" / "settings.py"
    settings_file.write_text(settings_file.read_text() + 'INSTALLED_APPS += ["django_orders"]\n')
    checked = django("check", cwd=project)
    assert checked.returncode != 0
    assert '(django_orders.E001) DJANGO_ORDERS["API_KEY"] is not set.' in checked.stderr
    assert '(django_orders.E001) DJANGO_ORDERS["BASE_URL"] is not set.' in checked.stderr
    # Nothing is read at import time: with the checks skipped, a machine without the key can
    # still migrate (the checks themselves stop a plain ``migrate``, as they should).
    migrated = django("migrate", "--no-input", "--skip-checks", cwd=project)
    assert migrated.returncode == 0, migrated.stderr


def test_the_readme_install_section_works_as_written(tmp_path, sandbox):
    """The README's settings snippet, pasted into a fresh ``startproject`` with only
    django-orders' own dependencies: without the variables, ``check`` reports E001 for both keys
    (no error at settings import) and ``migrate --skip-checks`` still migrates; with them, the
    README's commands (``migrate``, ``check_orders_api``) succeed against the sandbox."""
    steps = read_steps(README)
    project = tmp_path / "project"
    project.mkdir()
    assert django("startproject", "fresh", str(project), cwd=tmp_path).returncode == 0
    apply_settings(steps, project / "fresh" / "settings.py")

    checked = django("check", cwd=project)
    assert checked.returncode != 0
    # The settings lines are there: what is missing is the environment, and E001 says so.
    for name, variable in (("API_KEY", "ORDERS_API_KEY"), ("BASE_URL", "ORDERS_API_BASE_URL")):
        assert (
            f'(django_orders.E001) DJANGO_ORDERS["{name}"] is not set: '
            f"the environment variable {variable} is not set."
        ) in checked.stderr
    assert "Traceback" not in checked.stderr
    migrated = django("migrate", "--no-input", "--skip-checks", cwd=project)
    assert migrated.returncode == 0, migrated.stderr

    assert steps.environment == ["ORDERS_API_KEY", "ORDERS_API_BASE_URL"]
    environment = {"ORDERS_API_KEY": sandbox.api_key, "ORDERS_API_BASE_URL": sandbox.url}
    ran = []
    for command in steps.commands:
        done = django(*command[2:], cwd=project, **environment)
        assert done.returncode == 0, (command, done.stdout, done.stderr)
        ran.append(command[2])
    assert ran == ["migrate", "check_orders_api"]
    assert sandbox.api_key not in done.stdout + done.stderr

    # The README's way of holding the key: nothing prints it, diffsettings included.
    shown = django("diffsettings", cwd=project, **environment)
    assert shown.returncode == 0, shown.stderr
    assert "DJANGO_ORDERS = {'API_KEY': <Secret [hidden]>" in shown.stdout
    assert sandbox.api_key not in shown.stdout + shown.stderr


def test_the_readme_testing_section_works_as_written(tmp_path):
    """ "Testing your shop" followed in a new project: its pytest.ini and its example test,
    run with the command it gives, from the directory of manage.py, and nothing else set (no
    DJANGO_SETTINGS_MODULE in the environment). The control: without the README's pytest.ini the
    same run fails, so the lines the README shows are the ones that make it work."""
    steps, testing = read_steps(README), read_testing(README)
    assert testing.packages == ["pytest", "pytest-django"]  # installed here by scripts/test
    assert testing.command == ["pytest"]
    project = tmp_path / "project"
    project.mkdir()
    assert django("startproject", "shop", str(project), cwd=tmp_path).returncode == 0
    apply_settings(steps, project / "shop" / "settings.py")
    write_testing_files(testing, project)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "ORDERS_", "PYTEST_"))
        and k not in ("PYTHONPATH", "DATABASE_URL")
    }

    def run_pytest() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", *testing.command],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    ran = run_pytest()
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "1 passed" in ran.stdout

    (project / "pytest.ini").unlink()
    control = run_pytest()
    assert control.returncode != 0
    assert "settings are not configured" in control.stdout + control.stderr
