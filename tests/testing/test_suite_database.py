"""Two pytest runs at once in one checkout never share the SQLite test database: the first
takes var/test-db.sqlite3, any run started meanwhile a file of its own (``tests.settings``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO / "var" / "test-db.sqlite3"
PRINT_AND_WAIT = (
    "import sys, tests.settings as s; "
    "print(s.DATABASES['default']['TEST']['NAME'], flush=True); sys.stdin.read()"
)


def run_settings() -> tuple[subprocess.Popen, str]:
    """A process that loads the test settings as a pytest run would, and keeps them until its
    stdin closes; and the SQLite test database they chose."""
    unset = ("TEST_SQLITE_PATH", "DATABASE_URL", "DJANGO_ORDERS_TEST_DB_NAME")
    env = {name: value for name, value in os.environ.items() if name not in unset}
    process = subprocess.Popen(
        [sys.executable, "-c", PRINT_AND_WAIT],
        cwd=REPO,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def test_a_run_started_while_another_holds_the_database_takes_a_file_of_its_own():
    first, first_path = run_settings()
    second, second_path = run_settings()
    try:
        # The first takes the shared file, unless this pytest run holds it already.
        assert first_path in (str(SHARED), str(SHARED.with_name(f"test-db-{first.pid}.sqlite3")))
        assert second_path == str(SHARED.with_name(f"test-db-{second.pid}.sqlite3"))
    finally:
        for process in (first, second):
            process.communicate("")
    assert (first.returncode, second.returncode) == (0, 0)


def test_test_sqlite_path_still_decides_when_set(tmp_path):
    chosen = tmp_path / "mine.sqlite3"
    result = subprocess.run(
        [sys.executable, "-c", PRINT_AND_WAIT],
        cwd=REPO,
        env={**os.environ, "TEST_SQLITE_PATH": str(chosen), "DATABASE_URL": "sqlite:///x"},
        input="",
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == str(chosen)
