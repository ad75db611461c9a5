"""The layers of DESIGN.md, as the contracts of ``.importlinter``: the package keeps them, and
one forbidden import breaks its contract, with the import named in what ``lint-imports`` prints
(scripts/test runs it, so CI fails on it)."""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def contract_names() -> dict[str, str]:
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    prefix = "importlinter:contract:"
    return {s.removeprefix(prefix): config[s]["name"] for s in config if s.startswith(prefix)}


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on the ``django_orders`` package in ``tree``, with its ``.importlinter``."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo", str(tree / ".importlinter")],
        cwd=tree,
        # The package under ``tree`` before the installed one; lines wide enough not to be
        # wrapped inside a module name.
        env={**os.environ, "PYTHONPATH": str(tree), "COLUMNS": "250"},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def test_the_package_keeps_every_contract():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    for name in contract_names().values():
        assert f"{name} KEPT" in result.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract", "named"),
    [
        (
            "rest/views.py",
            "from ..sync.engine import sync_orders as deliberate",
            "interfaces",
            "django_orders.rest.views -> django_orders.sync.engine",
        ),
        (
            "admin/base.py",
            "from ..mirror.store import MirrorResult as deliberate",
            "interfaces",
            "django_orders.admin.base -> django_orders.mirror.store",
        ),
        (
            "rest/filters.py",
            "from ..admin.base import badge as deliberate",
            "one-direction",
            "django_orders.rest.filters -> django_orders.admin.base",
        ),
        (
            "conf/__init__.py",
            "from ..client.transport import reset as deliberate",
            "one-direction",
            "django_orders.conf -> django_orders.client.transport",
        ),
        (
            "client/pages.py",
            "from ..models import Order as deliberate",
            "transport",
            "django_orders.client.pages -> django_orders.models",
        ),
        (
            "mirror/comparison.py",
            "from ..creation.flow import create_order as deliberate",
            "data",
            "django_orders.mirror.comparison -> django_orders.creation.flow",
        ),
        (
            "sync/progress.py",
            "from ..management.base import whole_number as deliberate",
            "flows",
            "django_orders.sync.progress -> django_orders.management.base",
        ),
        (
            "testing/pytest_plugin.py",
            "from django_orders.models import Order as deliberate",
            "testing",
            "django_orders.testing.pytest_plugin -> django_orders.models",
        ),
    ],
)
def test_a_forbidden_import_breaks_its_contract_and_is_named(
    tmp_path, module, line, contract, named
):
    shutil.copy(ROOT / ".importlinter", tmp_path)
    shutil.copytree(
        ROOT / "django_orders",
        tmp_path / "django_orders",
        ignore=shutil.ignore_patterns("__pycache__", "templates", "static"),
    )
    with (tmp_path / "django_orders" / module).open("a") as source:
        source.write(f"\n{line}  # noqa\n")

    result = lint_imports(tmp_path)

    assert result.returncode != 0
    assert f"{contract_names()[contract]} BROKEN" in result.stdout, result.stdout
    assert named in result.stdout
