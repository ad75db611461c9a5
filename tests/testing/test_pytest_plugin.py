"""The README's "Testing your shop" example, run as a shop would run it: in its own pytest.

The example test is taken from the README text and run in a child pytest whose only plugins
are pytest-django and ``django_orders.testing.pytest_plugin``: loaded with ``-p`` (automatic
plugin loading off), through the ``pytest11`` entry point alone, and both at once (the entry
point is named after the module, so ``-p`` on top is not a clash). The child has a database of
its own (a SQLite file in the test's temporary directory), whatever this suite runs on.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

SECTION = "## Testing your shop"


def example_test() -> str:
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(SECTION)
    block = re.search(r"^```python\n(.*?)^```\n", text[start:], re.M | re.S)
    assert block, f"README {SECTION!r} has no python example"
    return block.group(1)


def run_example(tmp_path: Path, *plugin_args: str, autoload: bool) -> subprocess.CompletedProcess:
    (tmp_path / "test_checkout_recovery.py").write_text(example_test(), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PYTEST_"))}
    env.update(
        DJANGO_SETTINGS_MODULE="tests.settings",
        DATABASE_URL=f"sqlite:///{tmp_path / 'shop.sqlite3'}",
        TEST_SQLITE_PATH=str(tmp_path / "shop-test.sqlite3"),
        PYTHONPATH=str(REPO_ROOT),
    )
    if not autoload:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *plugin_args, "-q"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize(
    ("plugin_args", "autoload"),
    [
        (("-p", "pytest_django.plugin", "-p", "django_orders.testing.pytest_plugin"), False),
        ((), True),
        (("-p", "django_orders.testing.pytest_plugin"), True),
    ],
    ids=["-p only", "entry point", "entry point and -p"],
)
def test_the_readme_example_passes_with_the_plugin(tmp_path, plugin_args, autoload):
    result = run_example(tmp_path, *plugin_args, autoload=autoload)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout


def test_without_the_plugin_the_fixture_is_missing(tmp_path):
    """The control: the example's fixture comes from the plugin, not from anywhere else."""
    result = run_example(tmp_path, "-p", "pytest_django.plugin", autoload=False)
    assert result.returncode == 1
    assert "fixture 'orders_sandbox' not found" in result.stdout
